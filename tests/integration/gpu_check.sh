#!/usr/bin/env bash
# gpu_check.sh - scripts/gpu-check.sh, the script for the one run a lent GPU
# machine gets (issue 3, item 8), run here against the fake NVML library and
# a stand-in nvidia-smi: its summary must have every figure, it must write
# the summary even when the agent stops on its own, and with no GPU it must
# say so and fail. A mistake in it would otherwise show only on that run.
source "$(dirname "$0")/lib.sh"

: "${MLWATCH_BUILD:=$MLWATCH_SRC/build}"
fake=$MLWATCH_BUILD/tests/fakenvml/libnvidia-ml.so.1
[ -f "$fake" ] || fail "fake NVML library not built: $fake"
export FAKE_NVML_SCENARIO=$WORK/scenario.txt NVML_LIBRARY=$fake SECONDS_TO_RUN=2
# The kernel log: this machine's is not the test's; an XID 79 of GPU 1 now.
export KERNEL_LOG=$WORK/kmsg
now_us=$(awk '{ printf "%.0f", $1 * 1000000 }' /proc/uptime)
printf '%s\n' "6,7,$now_us,-;eth0: Link is Up" \
    "4,8,$now_us,-;NVRM: Xid (PCI:0000:02:00): 79, pid=77, name=python3, GPU has fallen off the bus." \
    >"$KERNEL_LOG"
# The script's temporary data folder goes here, where no other test's can be.
export TMPDIR=$WORK/tmp
mkdir -p "$TMPDIR"
printf '%s\n' 'gpu 0 util=10 memtotal=1000 memused=100 energy_mj=5000000 temp=40' \
    'gpu 1 util=20 memtotal=1000 memused=200 energy_mj=1000 temp=41' \
    'proc gpu=1 pid=1 mem=100' >"$FAKE_NVML_SCENARIO"

# nvidia-smi as the script calls it: -q, -L, and the CSV query.
mkdir -p "$WORK/bin"
cat >"$WORK/bin/nvidia-smi" <<'SH'
#!/bin/sh
case "$1" in
-L) echo "GPU 0: Fake GPU (UUID: GPU-fake-0)" ;;
-q) echo "==============NVSMI LOG==============" ;;
*) printf 'index, uuid\n0, GPU-fake-0\n1, GPU-fake-1\n' ;;
esac
SH
chmod +x "$WORK/bin/nvidia-smi"

# 1. The run as on a GPU machine.
PATH=$WORK/bin:$PATH MLWATCH_BIN=$MLWATCH_BIN "$MLWATCH_SRC/scripts/gpu-check.sh" "$WORK/out" \
    >"$WORK/stdout.txt" 2>"$WORK/stderr.txt" || fail "gpu-check.sh failed: $(cat "$WORK/stderr.txt")"
sum=$WORK/out/summary.txt
line() { grep -x "$1" "$sum" >/dev/null || fail "summary lacks '$1': $(cat "$sum")"; ok; }
expect_eq "stderr" "" "$(cat "$WORK/stderr.txt")"
line 'agent: ran 2 s and was stopped'
line 'GPUs: 2, compute processes: 1'
line 'gpu: mlwatch_gpu_info{gpu="1",uuid="GPU-fake-1",model="Fake GPU",pci_bus_id="0000:02:00.0",driver_version="550.54.15",cpu_affinity="",node="[^"]*"} 1'
line "log: .* info gpu: GPU telemetry: NVML, driver 550.54.15: 2 GPUs; XIDs from the kernel log ($KERNEL_LOG)"
if command -v promtool >/dev/null; then
    line 'promtool check metrics: clean'
else
    line 'promtool not installed: not checked'
fi
expect_eq "per-GPU poll times" 2 "$(grep -c '^  mlwatch_collector_duration_seconds{collector="gpu",gpu="[01]",node="[^"]*"} [0-9.e-]*$' "$sum")"
line '  mlwatch_collector_duration_seconds{collector="gpu",node="[^"]*"} [0-9.e-]*'
line 'slowest of 10 scrapes: [0-9]*\.[0-9]* s'
line 'agent RSS after 2 s: [1-9][0-9]* MiB (peak [1-9][0-9]* MiB), all collectors'
line 'samples: [1-9][0-9]*, GPU samples: [1-9][0-9]*'
line '  mlwatch_gpu_health{gpu="1",uuid="GPU-fake-1",state="unhealthy",reason="xid_79",action="reboot_node",node="[^"]*"} 1'
line '  mlwatch_gpu_health{gpu="0",uuid="GPU-fake-0",state="healthy",reason="none",action="none",node="[^"]*"} 1'
line '  mlwatch_gpu_node_health{state="unhealthy",reason="xid_79",action="reboot_node",node="[^"]*"} 1'
line '  gpu events: 1 (kernel log read: True, 2 records, 0 lost)'
line '    xid 79 gpu=1 count=1 before_start=True GPU has fallen off the bus.'
line 'ready: mlwatch is ready 200'
for f in exposition.prom scrape.prom agent.log nvidia-smi-q.txt nvidia-smi-L.txt gpu-events.json; do
    [ -s "$WORK/out/$f" ] || fail "no $f in the output folder"
    ok
done
expect_eq "nvidia-smi's CSV" "$(printf 'index, uuid\n0, GPU-fake-0\n1, GPU-fake-1')" \
    "$(cat "$WORK/out/nvidia-smi.csv")"
expect_eq "the summary printed" "$(cat "$sum")" "$(head -n "$(wc -l <"$sum")" "$WORK/stdout.txt")"
expect_eq "the agent's data folder removed" "" "$(ls -A "$TMPDIR")"

# 2. An agent that stops on its own: the summary is still written, and says so.
cat >"$WORK/bin/mlwatch-stops" <<SH
#!/bin/sh
[ "\$1" = agent ] && { echo "mlwatch: cannot start (test)" >&2; exit 3; }
exec "$MLWATCH_BIN" "\$@"
SH
chmod +x "$WORK/bin/mlwatch-stops"
SECONDS_TO_RUN=1 MLWATCH_BIN=$WORK/bin/mlwatch-stops "$MLWATCH_SRC/scripts/gpu-check.sh" "$WORK/out2" \
    >"$WORK/stdout2.txt" 2>"$WORK/stderr2.txt" || fail "gpu-check.sh failed when the agent stopped: $(cat "$WORK/stderr2.txt")"
sum=$WORK/out2/summary.txt
line 'agent: STOPPED BY ITSELF before 1 s (see agent.log): figures below are missing'
line 'GPUs: 2, compute processes: 0'
expect_eq "the agent's log kept" "mlwatch: cannot start (test)" "$(cat "$WORK/out2/agent.log")"
expect_eq "no scrapes of a stopped agent" "the agent is not serving (see agent.log): no scrapes" "$(cat "$WORK/stderr2.txt")"
ok

# An agent that does not stop: killed after STOP_WAIT_S, and the summary says so.
cat >"$WORK/bin/mlwatch-hangs" <<SH
#!/bin/sh
[ "\$1" = agent ] && { trap '' TERM; exec sleep 60; }
exec "$MLWATCH_BIN" "\$@"
SH
chmod +x "$WORK/bin/mlwatch-hangs"
READY_WAIT_S=1 STOP_WAIT_S=1 SECONDS_TO_RUN=1 MLWATCH_BIN=$WORK/bin/mlwatch-hangs "$MLWATCH_SRC/scripts/gpu-check.sh" "$WORK/out5" \
    >/dev/null 2>"$WORK/stderr5.txt" || fail "gpu-check.sh failed when the agent hung: $(cat "$WORK/stderr5.txt")"
sum=$WORK/out5/summary.txt
line 'agent: ran 1 s and DID NOT STOP within 1 s of SIGTERM (killed; see agent.log)'
line 'GPUs: 2, compute processes: 0'

# 3. As on the lent machine: mlwatch from scripts/device-bundle.sh, and only
# the commands a bare image has (no curl, no promtool, no nvidia-smi here).
"$MLWATCH_SRC/scripts/device-bundle.sh" "$WORK/bundle" >"$WORK/bundle.txt" 2>&1 ||
    fail "device-bundle.sh: $(cat "$WORK/bundle.txt")"
# Every library but glibc's and GCC's resolves inside the bundle.
outside=$(LD_LIBRARY_PATH=$WORK/bundle/lib ldd "$WORK/bundle/bin/mlwatch" |
    awk -v d="$WORK/bundle/lib/" '$2 == "=>" && index($3, d) != 1 && $1 !~ /^(libc|libm|libstdc\+\+|libgcc_s)\.so/ {print $1}')
expect_eq "libraries found outside the bundle" "" "$outside"
for lib in libmicrohttpd.so.12 libjansson.so.4 libgnutls.so.30 libyaml-0.so.2 libsnappy.so.1; do
    [ -f "$WORK/bundle/lib/$lib" ] || fail "$lib not in the bundle: $(ls "$WORK/bundle/lib")"
    ok
done
mkdir -p "$WORK/tools"
for t in bash sh env dirname cat mkdir mktemp grep awk sed sleep seq rm date uname touch kill; do
    p=$(type -P "$t") || continue
    ln -s "$p" "$WORK/tools/$t"
done
# python3 itself, not a version manager's shim (a script that needs more tools)
ln -s "$(python3 -c 'import sys; print(sys.executable)')" "$WORK/tools/python3"
PATH=$WORK/tools MLWATCH_BIN=$WORK/bundle/mlwatch "$MLWATCH_SRC/scripts/gpu-check.sh" "$WORK/out4" \
    >"$WORK/stdout4.txt" 2>"$WORK/stderr4.txt" || fail "gpu-check.sh with bare tools: $(cat "$WORK/stderr4.txt")"
expect_eq "stderr with bare tools" "" "$(cat "$WORK/stderr4.txt")"
sum=$WORK/out4/summary.txt
line 'agent: ran 2 s and was stopped'
line 'GPUs: 2, compute processes: 1'
line 'promtool not installed: not checked'
line 'slowest of 10 scrapes: [0-9]*\.[0-9]* s'
line 'samples: [1-9][0-9]*, GPU samples: [1-9][0-9]*'
[ ! -e "$WORK/out4/nvidia-smi.csv" ] || fail "nvidia-smi.csv without nvidia-smi"
ok

expect_eq "every run's data folder removed" "" "$(ls -A "$TMPDIR")"

# 4. No GPU: it says so, with the agent's reason, and fails.
printf '' >"$FAKE_NVML_SCENARIO"
if MLWATCH_BIN=$MLWATCH_BIN "$MLWATCH_SRC/scripts/gpu-check.sh" "$WORK/out3" >/dev/null 2>"$WORK/stderr3.txt"; then
    fail "gpu-check.sh succeeded without a GPU"
fi
expect_eq "no GPU" "no GPU found by mlwatch:" "$(head -1 "$WORK/stderr3.txt")"
grep -q 'gpu: no GPU telemetry (NVML: driver 550.54.15 reports no GPUs' "$WORK/stderr3.txt" ||
    fail "the agent's reason is missing: $(cat "$WORK/stderr3.txt")"
ok

done_ok
