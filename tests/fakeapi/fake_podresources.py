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
  --dra NS/POD/CONTAINER=CLAIM_NS/CLAIM:DRIVER/POOL/DEVICE[,DRIVER/POOL/DEVICE...]
                devices allocated through DRA (ContainerResources.dynamic_resources
                = 5: DynamicResource {claim_name 2, claim_namespace 3,
                claim_resources 4: ClaimResource {cdi_devices 1 (a CDI name,
                skipped by the client), driver_name 2, pool_name 3,
                device_name 4, share_id 5 (skipped)}})
  --allocatable RESOURCE:ID[,ID...]   what GetAllocatableResources answers
                (AllocatableResourcesResponse.devices = 1); without it the
                method is UNIMPLEMENTED (12), as on a kubelet without it
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


def response(allocs, dras=()):
    pods = {}
    for spec in allocs:
        who, what = spec.split("=", 1)
        ns, pod, ctr = who.split("/")
        res, ids = what.split(":", 1) if what.count(":") else (what, "")
        pods.setdefault((ns, pod), []).append((ctr, res, [i for i in ids.split(",") if i], None))
    for spec in dras:
        who, what = spec.split("=", 1)
        ns, pod, ctr = who.split("/")
        claim, devs = what.split(":", 1)
        cns, cname = claim.split("/")
        pods.setdefault((ns, pod), []).append(
            (ctr, None, [], (cns, cname, [d.split("/") for d in devs.split(",")])))
    body = b""
    for (ns, pod), ctrs in pods.items():
        p = field(1, pod) + field(2, ns)
        for ctr, res, ids, dra in ctrs:
            c = field(1, ctr)
            if res is not None:
                dev = field(1, res) + b"".join(field(2, i) for i in ids)
                # cpu_ids = 3 (packed int64): unknown to the client, skipped.
                c += field(2, dev) + field(3, varint(2) + varint(3))
            if dra is not None:
                cns, cname, devs = dra
                claim = field(2, cname) + field(3, cns)
                for driver, pool, device in devs:
                    cdi = field(1, field(1, "k8s.%s/claim=%s-%s" % (driver, cname, device)))
                    claim += field(4, cdi + field(2, driver) + field(3, pool) + field(4, device) +
                                   field(5, ""))
                c += field(5, claim)
            p += field(3, c)
        body += field(1, p)
    return body


def allocatable(spec):
    res, ids = spec.split(":", 1)
    return field(1, field(1, res) + b"".join(field(2, i) for i in ids.split(",") if i))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket", required=True)
    ap.add_argument("--alloc", action="append", default=[])
    ap.add_argument("--dra", action="append", default=[])
    ap.add_argument("--allocatable", action="append", default=[])
    ap.add_argument("--fail", type=int, default=0)
    a = ap.parse_args()
    payload = response(a.alloc, a.dra)
    alloc_payload = b"".join(allocatable(x) for x in a.allocatable)

    def list_(request, context):
        if a.fail:
            context.abort(grpc.StatusCode(next(c for c in grpc.StatusCode if c.value[0] == a.fail)),
                          "fake failure")
        return payload

    def allocatable_(request, context):
        if a.fail or not a.allocatable:
            context.abort(grpc.StatusCode.UNIMPLEMENTED if not a.fail else
                          grpc.StatusCode(next(c for c in grpc.StatusCode if c.value[0] == a.fail)),
                          "fake: no GetAllocatableResources")
        return alloc_payload

    from concurrent import futures

    handler = grpc.method_handlers_generic_handler(
        "v1.PodResourcesLister",
        {"List": grpc.unary_unary_rpc_method_handler(list_),
         "GetAllocatableResources": grpc.unary_unary_rpc_method_handler(allocatable_)},
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
