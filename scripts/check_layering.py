#!/usr/bin/env python3
"""check_layering.py - the arrows between the folders of src/ point one way.

Data flows collect -> derive -> store/query -> serve, notify, ship; core
knows no module; the agent wires them all. Each folder may include headers
from itself and from the folders MAY_INCLUDE names for it, nothing else,
except the few INTERFACES that a folder publishes for the stages that plug
into it. Prints one line per #include against the flow and exits 1 when
there is any (scripts/lint.sh runs it; integ_layering tests it).

    scripts/check_layering.py [SRC]      (default: src/ of this repository)
"""
import os
import re
import sys

# The rule table, the one place the layering is written down: each folder
# of src/ and the folders it may include from besides itself.
UPSTREAM_OF_SINKS = ["core", "proto", "collect", "kube", "derive", "store", "query", "rules"]
MAY_INCLUDE = {
    "core": [],  # knows no module
    "proto": ["core"],  # wire formats (protobuf): a codec library
    "collect": ["core"],  # reads the host
    "kube": ["core", "proto", "collect"],  # Kubernetes inputs, beside collect
    "derive": ["core", "collect", "kube"],  # computed from what the inputs read
    "store": ["core", "proto"],  # knows no query API, no module above it
    "query": ["core", "store"],  # PromQL over the store
    "rules": ["core", "store", "query"],  # recording and alerting rules
    "serve": UPSTREAM_OF_SINKS,  # the sinks see everything upstream,
    "notify": UPSTREAM_OF_SINKS,  # not each other
    "ship": UPSTREAM_OF_SINKS,
    "agent": None,  # the wiring: may include anything
    ".": None,  # src/main.c: the command line
}

# Headers a folder publishes for those that plug into it, and who may.
STAGES = ["collect", "kube", "derive", "store", "query", "rules", "serve", "notify", "ship"]
INTERFACES = {
    "mlwatch.h": None,  # version and build identity: anyone
    "agent/module.h": STAGES,  # the module contract every stage implements
    "serve/http.h": ["derive", "store", "query", "rules"],  # the router, for modules with routes
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def folder_of(rel):
    """The top folder of a path relative to src/ ("." for files in src/)."""
    return rel.split("/", 1)[0] if "/" in rel else "."


def violations(src):
    found = []
    for dirpath, _, names in os.walk(src):
        for name in sorted(names):
            if not name.endswith((".c", ".h")):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, src)
            shown = os.path.join(os.path.basename(src), rel)  # src/store/store_module.c
            here = folder_of(rel)
            if here not in MAY_INCLUDE:
                found.append("%s: folder %s/ is not in the rule table of %s" %
                             (shown, here, os.path.basename(__file__)))
                continue
            allowed = MAY_INCLUDE[here]
            with open(path, encoding="utf-8", errors="replace") as f:
                for lineno, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    target = os.path.normpath(os.path.join(dirpath, m.group(1)))
                    if not os.path.exists(target):
                        continue  # generated (*.pb-c.h) or system: not a folder of src/
                    trel = os.path.relpath(target, src).replace(os.sep, "/")
                    there = folder_of(trel)
                    if there == here or allowed is None or there in allowed:
                        continue
                    if trel in INTERFACES and (INTERFACES[trel] is None or here in INTERFACES[trel]):
                        continue
                    found.append("%s:%d: %s/ includes %s: %s/ may include only %s" %
                                 (shown, lineno, here, trel, here,
                                  ", ".join(allowed) if allowed else "itself"))
    return found


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "src")
    src = os.path.normpath(src)
    found = violations(src)
    for v in found:
        print(v)
    if found:
        print("layering: %d include(s) against the flow (rule table: scripts/%s)" %
              (len(found), os.path.basename(__file__)))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
