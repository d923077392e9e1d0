#!/usr/bin/env python3
"""bare_world.py - a plain VM for the web UI test (ui_bare.sh): no GPU, no
pods, no RAPL, hybrid cgroups (controllers on v1, v2 at unified/).

Builds, in a copy of the bare-vm fixture, the cgroup tree of four systemd
services and then moves the counters as a working machine does, every
PERIOD seconds:
  - /proc/stat: each of the two CPUs busy 40 % (user) and idle the rest, so
    the node's energy is estimated from CPU time;
  - cpu,cpuacct: cpuacct.usage of each service grows by its CPU share
    (postgresql 0.6 cores, nginx 0.3, ssh 0.05, cron 0.01); postgresql has a
    quota and is throttled in half its periods (cpu.stat);
  - memory: fixed usage and working set per service;
  - processes (/proc/PID/stat, the owner of /proc/PID, etc/passwd): PROCS
    below, their CPU ticks growing at their rates from the clock, every
    20 ms (a kernel thread among them, which the processes collector leaves
    out; the rates are apart by more than a loaded machine's jitter, not
    matched with /proc/stat);
  - unified/system.slice/postgresql.service/*.pressure: 0.3 s/s memory
    stall (0.4 s/s some) and 0.33 s/s io wait: well above the doctor's 0.1,
    even when a loaded machine runs this script late.
Usage: bare_world.py ROOT PERIOD   (runs until killed; writes ROOT/.ready
after the first step)"""
import os
import sys
import threading
import time

root, period = sys.argv[1], float(sys.argv[2])
CG = os.path.join(root, "sys/fs/cgroup")
# service -> (cores, memory usage bytes, inactive file bytes)
SERVICES = {
    "postgresql.service": (0.6, 1610612736, 268435456),
    "nginx.service": (0.3, 268435456, 67108864),
    "ssh.service": (0.05, 16777216, 0),
    "cron.service": (0.01, 4194304, 0),
}
USER_HZ = 100
NCPU = 2
# pid -> (command, uid, cores, resident pages, kernel thread)
PROCS = {
    1: ("systemd", 0, 0.0, 3072, False),
    2001: ("postgres", 106, 1.1, 40960, False),
    2011: ("postgres", 106, 0.4, 20480, False),
    2002: ("nginx", 33, 0.9, 12800, False),
    2003: ("sshd", 0, 0.25, 2048, False),
    2004: ("cron", 0, 0.1, 4096, False),
    2006: ("python3", 1000, 0.5, 65536, False),
    2007: ("kworker/0:1", 0, 1.9, 0, True),
    2008: ("bash", 1000, 0.0, 1280, False),
}
PASSWD = ("root:x:0:0:root:/root:/bin/bash\nwww-data:x:33:33:www-data:/var/www:/usr/sbin/nologin\n"
          "postgres:x:106:112:PostgreSQL administrator:/var/lib/postgresql:/bin/bash\n"
          "alice:x:1000:1000:Alice,,,:/home/alice:/bin/bash\n")


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def setup():
    acct = os.path.join(CG, "cpu,cpuacct")
    for link in ("cpu", "cpuacct"):
        if not os.path.lexists(os.path.join(CG, link)):
            os.makedirs(acct, exist_ok=True)
            os.symlink("cpu,cpuacct", os.path.join(CG, link))
    write(os.path.join(CG, "unified/cgroup.controllers"), "\n")
    write(os.path.join(CG, "unified/cgroup.procs"), "1\n")
    for h in ("cpu,cpuacct", "memory"):
        write(os.path.join(CG, h, "cgroup.procs"), "1\n")
        write(os.path.join(CG, h, "system.slice/cgroup.procs"), "")
    pid = 2000
    for name, (_, usage, inactive) in SERVICES.items():
        pid += 1
        d = os.path.join(CG, "cpu,cpuacct/system.slice", name)
        write(os.path.join(d, "cgroup.procs"), f"{pid}\n")
        write(os.path.join(d, "tasks"), f"{pid}\n")
        write(os.path.join(d, "cpu.cfs_period_us"), "100000\n")
        write(os.path.join(d, "cpu.cfs_quota_us"), "50000\n" if name == "postgresql.service" else "-1\n")
        m = os.path.join(CG, "memory/system.slice", name)
        write(os.path.join(m, "cgroup.procs"), f"{pid}\n")
        write(os.path.join(m, "memory.usage_in_bytes"), f"{usage}\n")
        write(os.path.join(m, "memory.limit_in_bytes"), "9223372036854771712\n")
        write(os.path.join(m, "memory.stat"),
              f"cache {inactive}\nrss {usage - inactive}\ntotal_rss {usage - inactive}\n"
              f"total_inactive_file {inactive}\ninactive_file {inactive}\n")
        os.makedirs(os.path.join(CG, "unified/system.slice", name), exist_ok=True)


def proc_stat(pid, t):
    comm, _, cores, rss, kthread = PROCS[pid]
    ticks = int(cores * USER_HZ * t)
    flags = 0x00208040 if kthread else 0x00400100
    # fields 3.. : state ppid pgrp session tty tpgid flags minflt cminflt
    # majflt cmajflt utime stime cutime cstime prio nice threads 0 start
    # vsize rss ...
    return (f"{pid} ({comm}) S 1 {pid} {pid} 0 -1 {flags} 100 0 0 0 {ticks} 0 0 0 20 0 1 0 "
            f"{500 + pid} {rss * 8192} {rss} 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n")


def procs_loop(t0):
    """The processes' CPU ticks from the clock, every 20 ms: any interval
    of the agent sees each one's rate within a tick or two."""
    while True:
        t = time.monotonic() - t0
        for pid in PROCS:
            write(os.path.join(root, f"proc/{pid}/stat"), proc_stat(pid, t))
        time.sleep(0.02)


def step(n):
    t = n * period
    lines = []
    busy = int(0.4 * USER_HZ * t)
    idle = int(0.6 * USER_HZ * t)
    base = [2369134, 357, 680245, 48633107, 44690, 0, 23579, 88888, 0, 0]
    tot = [v + (busy * NCPU if i == 0 else idle * NCPU if i == 3 else 0) for i, v in enumerate(base)]
    lines.append("cpu  " + " ".join(map(str, tot)))
    for c in range(NCPU):
        vals = [v // NCPU + (busy if i == 0 else idle if i == 3 else 0) for i, v in enumerate(base)]
        lines.append(f"cpu{c} " + " ".join(map(str, vals)))
    with open(os.path.join(root, "proc/stat")) as f:
        rest = [l for l in f.read().splitlines() if not l.startswith("cpu")]
    write(os.path.join(root, "proc/stat"), "\n".join(lines + rest) + "\n")
    for name, (cores, _, _) in SERVICES.items():
        d = os.path.join(CG, "cpu,cpuacct/system.slice", name)
        write(os.path.join(d, "cpuacct.usage"), f"{int(1e9 * (100 + cores * t))}\n")
        periods = int(10 * t / period)
        thr = periods // 2 if name == "postgresql.service" else 0
        write(os.path.join(d, "cpu.stat"),
              f"nr_periods {periods}\nnr_throttled {thr}\nthrottled_time {thr * 20000000}\n")
    u = os.path.join(CG, "unified/system.slice/postgresql.service")
    write(os.path.join(u, "memory.pressure"),
          f"some avg10=40.00 avg60=40.00 avg300=10.00 total={int(0.4e6 * t)}\n"
          f"full avg10=30.00 avg60=30.00 avg300=8.00 total={int(0.3e6 * t)}\n")
    write(os.path.join(u, "io.pressure"),
          f"some avg10=33.00 avg60=33.00 avg300=9.00 total={int(0.33e6 * t)}\n"
          f"full avg10=30.00 avg60=30.00 avg300=8.00 total={int(0.30e6 * t)}\n")
    write(os.path.join(u, "cpu.pressure"), f"some avg10=1.00 avg60=1.00 avg300=1.00 total={int(0.01e6 * t)}\n")


setup()
write(os.path.join(root, "etc/passwd"), PASSWD)
for pid, (_, uid, _, _, _) in PROCS.items():
    os.makedirs(os.path.join(root, f"proc/{pid}"), exist_ok=True)
    os.chown(os.path.join(root, f"proc/{pid}"), uid, uid)
t0 = time.monotonic()
for pid in PROCS:
    write(os.path.join(root, f"proc/{pid}/stat"), proc_stat(pid, 0))
threading.Thread(target=procs_loop, args=(t0,), daemon=True).start()
n = 0
while True:
    step(n)
    if n == 0:
        write(os.path.join(root, ".ready"), "1\n")
    n += 1
    time.sleep(period)
