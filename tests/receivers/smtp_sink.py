#!/usr/bin/python3
"""smtp_sink.py - a local SMTP server for e-mail notification tests, with
Debian's python3-aiosmtpd (run with /usr/bin/python3).

Like a submission server it offers STARTTLS (the certificate and key given),
refuses MAIL before STARTTLS (require_starttls) and, when --user is given,
requires AUTH PLAIN with that user and the password in --password-file.
Each message is appended to --out as one JSON line {"from", "to", "data",
"tls", "user"}. The port is written to --port-file once it listens.
"""
import argparse
import json
import os
import socket
import ssl
import sys
import time

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult


class Sink:
    def __init__(self, out):
        self.out = out

    async def handle_DATA(self, server, session, envelope):
        with open(self.out, "a") as f:
            f.write(json.dumps({
                "from": envelope.mail_from,
                "to": envelope.rcpt_tos,
                "data": envelope.content.decode("utf-8", "replace"),
                "tls": session.ssl is not None,
                "user": session.auth_data.decode() if isinstance(session.auth_data, bytes)
                else session.auth_data,
            }) + "\n")
        return "250 OK"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--port-file", required=True)
    p.add_argument("--user")
    p.add_argument("--password-file")
    a = p.parse_args()
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(a.cert, a.key)
    password = open(a.password_file).read().strip() if a.password_file else None

    def auth(server, session, envelope, mechanism, data):
        ok = a.user is not None and data.login.decode() == a.user and \
            data.password.decode() == password
        return AuthResult(success=ok, handled=False, auth_data=data.login if ok else None)

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    kw = dict(hostname="127.0.0.1", port=port, tls_context=ctx, require_starttls=True)
    if a.user:
        # Only PLAIN: aiosmtpd's LOGIN challenge ("User Name") is not the
        # "Username:" that Go's and Alertmanager's LOGIN client expect.
        kw.update(authenticator=auth, auth_required=True, auth_require_tls=True,
                  auth_exclude_mechanism=["LOGIN"])
    c = Controller(Sink(a.out), **kw)
    c.start()
    with open(a.port_file + ".tmp", "w") as f:
        f.write(str(port))
    os.rename(a.port_file + ".tmp", a.port_file)
    try:
        while True:
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    c.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
