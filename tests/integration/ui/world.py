#!/usr/bin/env python3
"""world.py - keeps a copied fixture tree alive for the web UI test (ui.sh).

Fixture trees are frozen: every counter stands still, so every rate() is 0
and a chart of CPU throttling or power would be flat or empty. This moves
the counters the way a working node does, every PERIOD seconds:
  - cgroup v2 cpu.stat: usage, periods, throttled periods and time grow by
    fixed steps (notebook-a throttled in half its periods);
  - RAPL energy_uj grows by 50 J per step (below max_energy_range_uj);
  - the fake NVML scenario file is rewritten (atomically) with each GPU's
    energy counter grown by its power times the period; GPU 1 (train-1's)
    runs hot, slowed down by a thermal clock event reason.
Usage: world.py ROOT SCENARIO PERIOD   (runs until killed)"""
import os
import sys
import time

root, scenario, period = sys.argv[1], sys.argv[2], float(sys.argv[3])

# GPU index -> (utilization %, memory used, power mW); notebook-a's GPU 0 is
# idle, train-1's GPU 1 busy, notebook-b's GPU 2 idle.
GPUS = {
    0: ("NVIDIA H100 80GB HBM3", "GPU-00000000-0000-4000-8000-000000000000", "00000000:18:00.0",
        0, 2147483648, 100000),
    1: ("NVIDIA H100 80GB HBM3", "GPU-11111111-0000-4000-8000-000000000001", "00000000:28:00.0",
        80, 4294967296, 600000),
    2: ("NVIDIA H100 80GB HBM3", "GPU-22222222-0000-4000-8000-000000000002", "00000000:38:00.0",
        0, 2147483648, 120000),
}
PROCS = "proc gpu=0 pid=4001 mem=1073741824\nproc gpu=1 pid=3001 mem=4000000000\n" \
        "proc gpu=2 pid=4002 mem=1073741824\n"


def write_scenario(step):
    lines = ["system driver=550.54.15"]
    for i, (name, uuid, bus, util, used, mw) in GPUS.items():
        energy_mj = 1000000 + int(mw * period * step)
        lines.append(f'gpu {i} name="{name}" uuid={uuid} bus={bus}')
        # train-1's GPU 1 is hot: software thermal slowdown (0x20), its SM
        # clock at 1500 of 1980 MHz (the doctor's gpu_thermal_throttle).
        hot = i == 1
        reasons = "0x1" if util == 0 else ("0x20" if hot else "0x0")
        lines.append(f"gpu {i} util={util} memtotal=85520809984 memused={used} power_mw={mw} "
                     f"energy_mj={energy_mj} sm_mhz={1500 if hot else 1980 - 30 * i} "
                     f"sm_max_mhz=1980 mem_mhz=2619 mem_max_mhz=2619 reasons={reasons} "
                     f"temp={87 if hot else 40 + i} numa={i % 2} "
                     # GPU 2's link trained down to 4.0 x8, with corrected ECC errors
                     f"pcie_gen={4 if i == 2 else 5} pcie_gen_max=5 "
                     f"pcie_width={8 if i == 2 else 16} pcie_width_max=16 "
                     f"ecc_corrected={12 if i == 2 else 0} ecc_uncorrected=0")
    tmp = scenario + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(lines) + "\n" + PROCS)
    os.replace(tmp, scenario)


def bump_cpu_stat(path):
    vals = {}
    with open(path) as f:
        for line in f:
            k, v = line.split()
            vals[k] = int(v)
    throttled = "4001" in open(os.path.join(os.path.dirname(path), "cgroup.procs")).read() \
        if os.path.exists(os.path.join(os.path.dirname(path), "cgroup.procs")) else False
    vals["usage_usec"] = vals.get("usage_usec", 0) + int(period * 250000)
    vals["nr_periods"] = vals.get("nr_periods", 0) + 10
    if throttled:
        vals["nr_throttled"] = vals.get("nr_throttled", 0) + 5
        vals["throttled_usec"] = vals.get("throttled_usec", 0) + int(period * 100000)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("".join(f"{k} {v}\n" for k, v in vals.items()))
    os.replace(tmp, path)


def bump_energy(path):
    with open(path) as f:
        v = int(f.read().strip() or 0)
    # Written beside and renamed over, as the other files here: a rewrite in
    # place let the agent read an empty or half-written energy_uj now and
    # then ("malformed content" in its log).
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"{v + 50000000}\n")
    os.replace(tmp, path)


cpu_stats, rapl = [], []
for d, _, files in os.walk(os.path.join(root, "sys")):
    if "cpu.stat" in files and "cgroup" in d and "pod" in d:
        cpu_stats.append(os.path.join(d, "cpu.stat"))
    if "energy_uj" in files and "powercap" in d:
        rapl.append(os.path.join(d, "energy_uj"))

# The cgroups' CPU periods before the scenario file (which ui.sh waits for):
# the fixture's cpu.stat has no nr_periods, and a container whose first
# frame lacks them is not judged for CFS throttling until that frame leaves
# the doctor's window.
for p in cpu_stats:
    bump_cpu_stat(p)
step = 0
while True:
    write_scenario(step)
    if step:
        for p in cpu_stats:
            bump_cpu_stat(p)
        for p in rapl:
            bump_energy(p)
    step += 1
    time.sleep(period)
