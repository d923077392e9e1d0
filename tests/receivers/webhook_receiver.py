#!/usr/bin/env python3
"""webhook_receiver.py - a local HTTP receiver for notification tests: a
Mattermost/Slack incoming webhook or an Alertmanager webhook receiver.

Each POST is answered 200 (like Mattermost's "ok") and appended to --out as
one JSON line {"path", "content_type", "authorization", "body"}; a body that
is not JSON is answered 400, as Mattermost and Slack do. --port 0 picks a free port
(written to --port-file); a fixed --port lets a test stop the receiver and
start it again on the same address.
"""
import argparse
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(n)
        try:
            body = json.loads(raw)
            status, answer = 200, b"ok"
        except ValueError:
            body, status, answer = raw.decode("utf-8", "replace"), 400, b"invalid payload"
        with LOCK:
            with open(self.server.out, "a") as f:
                f.write(json.dumps({"path": self.path,
                                    "content_type": self.headers.get("Content-Type"),
                                    "authorization": self.headers.get("Authorization"),
                                    "body": body}) + "\n")
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--port-file")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    ThreadingHTTPServer.allow_reuse_address = True
    srv = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    srv.daemon_threads = True
    srv.out = a.out
    if a.port_file:
        with open(a.port_file + ".tmp", "w") as f:
            f.write(str(srv.server_address[1]))
        os.rename(a.port_file + ".tmp", a.port_file)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
