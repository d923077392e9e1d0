#!/usr/bin/env python3
"""fake_apiserver.py - a stand-in for the Kubernetes API server's pod list
and watch, for tests of mlwatch's pod watcher (src/kube/kube.c).

It answers like the real one: GET /api/v1/pods?fieldSelector=spec.nodeName=N
gives a PodList (recorded JSON in tests/fixtures/kube), and with watch=1 a
chunked stream of one JSON event per line. Requests need
"Authorization: Bearer TOKEN" (else 401) and the node's field selector
(else 400, as a server would answer a bad selector... for another node it
would answer an empty list; here a wrong node is a test failure).

The script of a test run (the real server's behaviour it imitates):
  list 1   -> podlist.json (resourceVersion 2000)
  watch 1  -> MODIFIED (rv 2001), then the connection drops mid-stream
              (no terminating chunk): a dropped watch
  watch 2  -> must resume from rv 2001: DELETED (2002), BOOKMARK (2003), then
              an ERROR event with code 410 (Gone), and the stream ends
  list 2.. -> podlist-after-gone.json (2600)
  watch 3.. -> held open with nothing to say until the client goes away
Every request is appended as a JSON line to --log.

With --static the pod list is always podlist.json and every watch is held
open with nothing to say. In both modes it also serves, like the real one
(resource.k8s.io/v1, Kubernetes 1.34+):
  GET /apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName=N
                -> resourceslices.json (a ResourceSliceList)
  GET /apis/resource.k8s.io/v1/resourceclaims
                -> resourceclaims.json (a ResourceClaimList, all namespaces)
  either one 404 when its fixture is absent (a server without the API)
  PATCH /api/v1/nodes/N/status with Content-Type
                application/strategic-merge-patch+json (or merge-patch,
                json-patch) -> 200 and the node; another content type ->
                415 Unsupported Media Type; logged with its body as
                {"kind": "patch", "path", "content_type", "body"}

With --list-delay S the first pod list is answered only after S seconds,
as a slow or distant API server's would be: the kubelet's pod-resources
then name pods the watcher does not know yet.

With --cert and --key it serves HTTPS (TLS over the same socket), as the
real API server does; a client that rejects the certificate shows up in
--log as {"kind": "tls-error", "t": SECONDS} (the handshake failed, no
request came; t is the time, to check the client's backoff). With
--client-ca as well it authenticates client certificates signed by that CA
as kube-apiserver's --client-ca-file does (Go's VerifyClientCertIfGiven): it
asks for a certificate during the handshake; a request with a verified one
needs no token and is logged with "user" (the certificate's CN); a client
without one is judged by its token (none: 401); a certificate of another CA
fails the handshake (tls-error).
"""
import argparse
import json
import os
import ssl
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ARGS = None
LOCK = threading.Lock()
COUNTS = {"list": 0, "watch": 0}


def fixture(name):
    with open(os.path.join(ARGS.fixtures, name), "rb") as f:
        return f.read()


def log(entry):
    with LOCK:
        with open(ARGS.log, "a") as f:
            f.write(json.dumps(entry) + "\n")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # quiet
        pass

    def answer(self, status, body, ctype="application/json"):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def event(self, name):
        # The API server writes each event as one JSON line.
        self.chunk(json.dumps(json.loads(fixture(name))).encode() + b"\n")

    def authorized(self):
        user = client_cn(self.connection)
        if user is None and self.headers.get("Authorization") != "Bearer " + ARGS.token:
            log({"kind": "unauthorized", "t": time.time()})
            self.answer(401, b'{"kind":"Status","code":401,"reason":"Unauthorized"}')
            return False
        return True

    def do_PATCH(self):
        if not self.authorized():
            return
        n = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(n).decode()
        ctype = self.headers.get("Content-Type", "")
        log({"kind": "patch", "path": self.path, "content_type": ctype, "body": body,
             "t": time.time()})
        if self.path != "/api/v1/nodes/%s/status" % ARGS.node:
            return self.answer(404, b'{"kind":"Status","code":404}')
        if ctype not in ("application/strategic-merge-patch+json", "application/merge-patch+json",
                         "application/json-patch+json"):
            return self.answer(415, b'{"kind":"Status","code":415,"reason":"UnsupportedMediaType"}')
        node = {"kind": "Node", "apiVersion": "v1", "metadata": {"name": ARGS.node},
                "status": json.loads(body).get("status", {})}
        return self.answer(200, json.dumps(node).encode())

    def resource_api(self, url, q):
        name = url.path.rsplit("/", 1)[1]
        if name == "resourceslices" and q.get("fieldSelector") != ["spec.nodeName=" + ARGS.node]:
            log({"kind": "bad-selector", "query": url.query})
            return self.answer(400, b'{"kind":"Status","code":400,"reason":"BadRequest"}')
        log({"kind": name})
        path = os.path.join(ARGS.fixtures, name + ".json")
        if not os.path.exists(path):
            return self.answer(404, b'{"kind":"Status","code":404,"reason":"NotFound"}')
        return self.answer(200, fixture(name + ".json"))

    def do_GET(self):
        url = urllib.parse.urlparse(self.path)
        q = urllib.parse.parse_qs(url.query)
        user = client_cn(self.connection)
        if not self.authorized():
            return
        if url.path in ("/apis/resource.k8s.io/v1/resourceslices",
                        "/apis/resource.k8s.io/v1/resourceclaims"):
            return self.resource_api(url, q)
        if url.path != "/api/v1/pods":
            return self.answer(404, b'{"kind":"Status","code":404}')
        if q.get("fieldSelector") != ["spec.nodeName=" + ARGS.node]:
            log({"kind": "bad-selector", "query": url.query})
            return self.answer(400, b'{"kind":"Status","code":400,"reason":"BadRequest"}')
        if q.get("watch") != ["1"]:
            with LOCK:
                COUNTS["list"] += 1
                n = COUNTS["list"]
            log({"kind": "list", "n": n, **({"user": user} if user else {})})
            if n == 1 and ARGS.list_delay > 0:
                time.sleep(ARGS.list_delay)
            return self.answer(200, fixture("podlist.json" if n == 1 or ARGS.static
                                            else "podlist-after-gone.json"))
        with LOCK:
            COUNTS["watch"] += 1
            n = COUNTS["watch"]
        rv = q.get("resourceVersion", [""])[0]
        log({"kind": "watch", "n": n, "rv": rv,
             "bookmarks": q.get("allowWatchBookmarks") == ["true"]})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if n == 1 and not ARGS.static:
            self.event("event-modified.json")
            time.sleep(0.3)
            # Drop the connection mid-stream: no terminating chunk.
            self.close_connection = True
            self.connection.shutdown(2)
            return
        if n == 2 and not ARGS.static:
            self.event("event-deleted.json")
            self.event("event-bookmark.json")
            time.sleep(0.2)
            self.event("event-gone.json")
            self.wfile.write(b"0\r\n\r\n")
            self.close_connection = True
            return
        # Later watches: nothing happens; end after timeoutSeconds at most.
        deadline = time.time() + min(60, int(q.get("timeoutSeconds", ["60"])[0]))
        try:
            while time.time() < deadline:
                time.sleep(0.5)
                # A real server sends nothing either; writing nothing means a
                # client that went away is noticed at the end only.
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            pass
        self.close_connection = True


class TLSServer(ThreadingHTTPServer):
    """The threading server over a TLS-wrapped listening socket: the
    handshake runs in accept(), so a failed one is logged and dropped."""

    def get_request(self):
        try:
            return super().get_request()
        except ssl.SSLError:
            log({"kind": "tls-error", "t": time.time()})
            raise


def client_cn(conn):
    """The CN of the verified client certificate, or None."""
    cert = conn.getpeercert() if isinstance(conn, ssl.SSLSocket) else None
    for rdn in (cert or {}).get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return value
    return None


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--fixtures", required=True)
    p.add_argument("--token", required=True)
    p.add_argument("--node", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--port-file", required=True)
    p.add_argument("--cert", help="PEM server certificate: serve HTTPS")
    p.add_argument("--key", help="PEM private key of --cert")
    p.add_argument("--client-ca", help="PEM CA: require client certificates it signed")
    p.add_argument("--list-delay", type=float, default=0,
                   help="answer the first pod list after this many seconds")
    p.add_argument("--static", action="store_true",
                   help="always podlist.json; watches held open without events")
    ARGS = p.parse_args()
    if bool(ARGS.cert) != bool(ARGS.key):
        p.error("--cert and --key go together")
    if ARGS.cert:
        srv = TLSServer(("127.0.0.1", 0), Handler)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(ARGS.cert, ARGS.key)
        if ARGS.client_ca:
            ctx.verify_mode = ssl.CERT_OPTIONAL
            ctx.load_verify_locations(ARGS.client_ca)
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    else:
        srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    tmp = ARGS.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(tmp, ARGS.port_file)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
