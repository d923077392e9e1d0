#!/usr/bin/env python3
"""Generate docs/metrics.md from what mlwatch actually exposes.

Reads OpenMetrics expositions (files given as arguments, or produced by
`mlwatch metrics --format openmetrics --root FIXTURE` for every fixture) and
prints one Markdown table row per family: name, type, unit, labels, help.
tests/integration/metrics_doc.sh fails when docs/metrics.md is stale.
"""
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent
FIXTURES = ["k8s-v2-systemd", "k8s-v1-cgroupfs", "rapl-cpufreq", "bare-vm", "amd-gpu-node"]
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? ')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*"')


NO_GPU = ["--nvml-library", "none", "--rocm-library", "none"]
GPU_SCENARIOS = ["h100x8", "a100-mig", "h100-mig"]


def om(binary, args, env=None):
    return subprocess.run([binary, "metrics", "--format", "openmetrics"] + args, check=True,
                          capture_output=True, text=True, env=env).stdout


def agent_exposition(binary, fake_nvml):
    """The families only a running agent exports (energy, carbon, idle GPU
    sessions, GPU allocations, its modules' self-metrics): one agent on the GPU
    fixture node with the fake NVML and the fake kubelet pod-resources server
    (one allocated GPU), scraped after a few cycles; its Alertmanager (a port
    where nothing listens) is there for the sender's families."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "root")
        shutil.copytree(SRC / "tests/fixtures/gpu-node", root, symlinks=True)
        # One process with a stat file, for the busiest-processes families
        # (collect/processes.c; the fixture's processes have none).
        with open(os.path.join(root, "proc/3000/stat"), "w") as f:
            f.write("3000 (python3) S 1 3000 3000 0 -1 4194560 10 0 0 0 500 20 0 0 20 0 8 0 900 "
                    "8192000 262144 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n")
        sock = os.path.join(root, "var/lib/kubelet/pod-resources/kubelet.sock")
        os.makedirs(os.path.dirname(sock))
        kubelet = subprocess.Popen(["/usr/bin/python3", str(SRC / "tests/fakeapi/fake_podresources.py"),
                                    "--socket", sock, "--alloc",
                                    "ml-team/train-0/main=nvidia.com/gpu:GPU-00000000-0000-0000-0000-000000000000"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(100):
            if os.path.exists(sock):
                break
            time.sleep(0.1)
        env = dict(os.environ, FAKE_NVML_SCENARIO=str(SRC / "tests/fakenvml/scenarios/h100x8.txt"))
        proc = subprocess.Popen([binary, "agent", "--listen", f"127.0.0.1:{port}", "--interval", "200ms",
                                 "--root", root, "--nvml-library", fake_nvml,
                                 "--rocm-library", "none", "--carbon-intensity", "100",
                                 "--state-dir", tmp, "--data-dir", tmp, "--log-level", "error",
                                 "--alertmanager-url", "http://127.0.0.1:9"],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(2.5)
            req = urllib.request.Request(f"http://127.0.0.1:{port}/metrics",
                                         headers={"Accept": "application/openmetrics-text;version=1.0.0"})
            return urllib.request.urlopen(req, timeout=10).read().decode()
        finally:
            proc.terminate()
            proc.wait(timeout=10)
            kubelet.terminate()
            kubelet.wait(timeout=10)


def expositions(binary, extra):
    for fx in FIXTURES:
        root = SRC / "tests" / "fixtures" / fx
        if root.is_dir():
            yield om(binary, ["--root", str(root)] + NO_GPU)
    fake = Path(binary).resolve().parent / "tests" / "fakenvml" / "libnvidia-ml.so.1"
    if fake.exists():
        for sc in GPU_SCENARIOS:
            env = dict(os.environ, FAKE_NVML_SCENARIO=str(SRC / f"tests/fakenvml/scenarios/{sc}.txt"))
            yield om(binary, ["--root", str(SRC / "tests/fixtures/gpu-node"), "--nvml-library", str(fake),
                              "--rocm-library", "none"], env)
        yield agent_exposition(binary, str(fake))
    for path in extra:
        yield Path(path).read_text()


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else str(SRC / "build" / "mlwatch")
    families = {}
    for text in expositions(binary, sys.argv[2:]):
        current = None
        for line in text.splitlines():
            if line.startswith("# TYPE "):
                _, _, name, typ = line.split(" ", 3)
                # HELP may come first (it does in mlwatch's OpenMetrics text):
                # the TYPE line sets the type either way.
                current = families.setdefault(name, {"type": typ, "unit": "", "help": "", "labels": set()})
                current["type"] = typ
            elif line.startswith("# UNIT "):
                families[line.split(" ")[2]]["unit"] = line.split(" ", 3)[3]
            elif line.startswith("# HELP "):
                name, help_text = line.split(" ", 3)[2:]
                families.setdefault(name, {"type": "", "unit": "", "help": "", "labels": set()})["help"] = help_text
            elif line and not line.startswith("#") and current is not None:
                m = SAMPLE.match(line)
                labels = LABEL.findall(m.group(2) or "") if m else []
                current["labels"].update(labels)
                if m and "node" not in labels:
                    current["without_node"] = True
    print("# Metrics reference\n")
    print("Generated by `scripts/metrics_doc.py` from what mlwatch exposes on the fixture")
    print("nodes in tests/fixtures, with the fake NVML library's scenarios and one running")
    print("agent (for energy, carbon and idle-session families), so every family here is real.")
    print("Sample names: counters end in `_total`, info metrics in `_info` (value 1);")
    print("in the text format the family name is the sample name.")
    print("Every series also carries `node`, the agent's node name (`--node-name`, else")
    print("`$NODE_NAME`, else the host name), the same on /metrics and in remote write;")
    print("the table leaves it out of the labels column.\n")
    print("| family | type | unit | labels | help |")
    print("|---|---|---|---|---|")
    for name in sorted(families):
        f = families[name]
        sample = name + ("_total" if f["type"] == "counter" else "_info" if f["type"] == "info" else "")
        shown = f["labels"] - ({"node"} if not f.get("without_node") else set())
        labels = ", ".join(f"`{l}`" for l in sorted(shown))
        print(f"| `{sample}` | {f['type']} | {f['unit']} | {labels} | {f['help'].replace('|', '/')} |")


if __name__ == "__main__":
    main()
