#!/usr/bin/env python3
"""rw_counter.py - a local remote-write receiver for tests that need only to
know when requests arrive, not what they hold.

Each POST is answered 204, or 503 while the number in --refuse-file is above
0 (then one less is written back: "refuse the next N requests"). Each
request is appended to --out as one line "MONOTONIC_SECONDS STATUS BYTES",
the receiver's own CLOCK_MONOTONIC, which the wall-clock shim of the agent
under test does not touch. --port 0 picks a free port (written to
--port-file).
"""
import argparse
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()


def take_refusal(path):
    """True (and one refusal fewer) while the refuse file holds N > 0."""
    try:
        with open(path) as f:
            left = int(f.read().strip() or "0")
    except (OSError, ValueError):
        return False
    if left <= 0:
        return False
    with open(path + ".tmp", "w") as f:
        f.write(str(left - 1))
    os.replace(path + ".tmp", path)
    return True


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(n)
        with LOCK:
            status = 503 if take_refusal(ARGS.refuse_file) else 204
            with open(ARGS.out, "a") as f:
                f.write("%.3f %d %d\n" % (time.monotonic(), status, n))
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--port-file")
    p.add_argument("--out", required=True)
    p.add_argument("--refuse-file", required=True)
    ARGS = p.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", ARGS.port), Handler)
    if ARGS.port_file:
        with open(ARGS.port_file + ".tmp", "w") as f:
            f.write(str(srv.server_address[1]))
        os.replace(ARGS.port_file + ".tmp", ARGS.port_file)
    srv.serve_forever()


if __name__ == "__main__":
    main()
