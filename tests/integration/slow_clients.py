#!/usr/bin/env python3
"""slow_clients.py - hostile HTTP clients for tests/integration/http_slow_clients.sh
and bench/http_under_load.sh.

    slow_clients.py PORT COUNT MODE SECONDS READY_FILE REPORT_FILE [SOURCES]

opens COUNT TCP connections to 127.0.0.1:PORT, spread round-robin over the
source addresses SOURCES (comma-separated, default 127.0.0.2; every 127/8
address reaches the loopback listener, so each source is a distinct client
address for the server's per-address limit), and holds them for SECONDS:

    idle   connect and send nothing
    drip   send a request line, then one header line every second, never the
           blank line that ends the headers (a slowloris)
    line   send the request line one byte every two seconds (each byte
           restarts an idle timer; only a total deadline cuts it)

Once every connection is attempted it writes READY_FILE. At the end it writes
REPORT_FILE, one "key value" a line:

    opened N          connections the kernel accepted
    closed_by_server  of them, how many the server closed (end of file or reset)
    open_at_end       still open after SECONDS
    first_close_s     seconds from opening to the first close by the server (-1: none)
    last_close_s      ... to the last close by the server (-1: none)
"""
import os
import selectors
import socket
import sys
import time


def main():
    port, count, mode, seconds = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
    ready, report = sys.argv[5], sys.argv[6]
    sources = (sys.argv[7] if len(sys.argv) > 7 else "127.0.0.2").split(",")
    if mode not in ("idle", "drip", "line"):
        sys.exit("mode must be idle, drip or line")
    request_line = b"GET /metrics HTTP/1.1\r\n"
    sel = selectors.DefaultSelector()
    conns = {}  # socket -> [opened_at, closed_at or None]
    for i in range(count):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind((sources[i % len(sources)], 0))
        try:
            s.connect(("127.0.0.1", port))
        except OSError as e:
            print("connect %d: %s" % (i, e), file=sys.stderr)
            s.close()
            continue
        s.setblocking(False)
        conns[s] = [time.monotonic(), None]
        sel.register(s, selectors.EVENT_READ)
        if mode == "drip":
            try:
                s.send(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
            except OSError:
                conns[s][1] = time.monotonic()
                sel.unregister(s)
    with open(ready + ".tmp", "w") as f:
        f.write("%d\n" % len(conns))
    os.rename(ready + ".tmp", ready)
    end = time.monotonic() + seconds
    next_drip = time.monotonic() + 1
    line = 0
    while True:
        now = time.monotonic()
        if now >= end:
            break
        for key, _ in sel.select(timeout=min(0.2, end - now)):
            s = key.fileobj
            try:
                data = s.recv(4096)
            except OSError:
                data = b""
            if not data:
                conns[s][1] = time.monotonic()
                sel.unregister(s)
        if mode != "idle" and time.monotonic() >= next_drip:
            next_drip += 1
            line += 1
            if mode == "drip":
                data = b"X-Drip-%d: %d\r\n" % (line, line)
            elif line % 2 == 0:
                data = request_line[(line // 2 - 1) % len(request_line):][:1]
            else:
                continue
            for s, st in conns.items():
                if st[1] is not None:
                    continue
                try:
                    s.send(data)
                except OSError:
                    st[1] = time.monotonic()
                    sel.unregister(s)
    closes = [st[1] - st[0] for st in conns.values() if st[1] is not None]
    with open(report, "w") as f:
        f.write("opened %d\n" % len(conns))
        f.write("closed_by_server %d\n" % len(closes))
        f.write("open_at_end %d\n" % (len(conns) - len(closes)))
        f.write("first_close_s %.1f\n" % (min(closes) if closes else -1))
        f.write("last_close_s %.1f\n" % (max(closes) if closes else -1))
    for s in conns:
        s.close()


if __name__ == "__main__":
    main()
