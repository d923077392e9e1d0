#!/usr/bin/python3
"""fake_podresources.py - a fake kubelet pod-resources API for the tests.

Serves gRPC service v1.PodResourcesLister, method List, on a unix socket
(the kubelet's is /var/lib/kubelet/pod-resources/kubelet.sock) with
python3-grpcio, like the kubelet: HTTP/2 cleartext, one response message
and grpc-status in the trailers. The protobuf bytes are built by hand (the
messages are small), field numbers as in kubernetes/kubelet's
pkg/apis/podresources/v1/api.proto; a cpu_ids field is sent too, which the
client must skip.

  fake_podresources.py --socket PATH --alloc NS/POD/CONTAINER=RESOURCE:ID[,ID...] ...
  --fail CODE   answer every call with that grpc-status instead
"""
import argparse
import signal
import sys
import threading

import grpc


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(num, payload):
    """A length-delimited field (wire type 2)."""
    if isinstance(payload, str):
        payload = payload.encode()
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def response(allocs):
    pods = {}
    for spec in allocs:
        who, what = spec.split("=", 1)
        ns, pod, ctr = who.split("/")
        res, ids = what.rsplit(":", 1) if what.count(":") else (what, "")
        pods.setdefault((ns, pod), []).append((ctr, res, [i for i in ids.split(",") if i]))
    body = b""
    for (ns, pod), ctrs in pods.items():
        p = field(1, pod) + field(2, ns)
        for ctr, res, ids in ctrs:
            dev = field(1, res) + b"".join(field(2, i) for i in ids)
            # cpu_ids = 3 (packed int64): unknown to the client, skipped.
            c = field(1, ctr) + field(2, dev) + field(3, varint(2) + varint(3))
            p += field(3, c)
        body += field(1, p)
    return body


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket", required=True)
    ap.add_argument("--alloc", action="append", default=[])
    ap.add_argument("--fail", type=int, default=0)
    a = ap.parse_args()
    payload = response(a.alloc)

    def list_(request, context):
        if a.fail:
            context.abort(grpc.StatusCode(next(c for c in grpc.StatusCode if c.value[0] == a.fail)),
                          "fake failure")
        return payload

    from concurrent import futures

    handler = grpc.method_handlers_generic_handler(
        "v1.PodResourcesLister",
        {"List": grpc.unary_unary_rpc_method_handler(list_)},
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers((handler,))
    if not server.add_insecure_port("unix:" + a.socket):
        sys.exit("cannot listen on " + a.socket)
    server.start()
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    done.wait()
    server.stop(0)


if __name__ == "__main__":
    main()
