#!/usr/bin/env bash
# rss_side_by_side.sh - resident memory of several mlwatch builds, started
# together on the node and fake GPUs of bench_gpu_collect, at the agent's
# default 1-s interval.
#
#   bench/rss_side_by_side.sh [-s SECONDS] [-S SAMPLE_SECONDS] [-e 'ARGS'] [-f] [-c CPUS] BIN...
#
# The node is tests/fixtures/generate-node.sh's (100 pods, 299 containers);
# 8 fake H100s (build/tests/fakenvml, or FAKE_LIBNVML) carry 13 processes
# each, taken from the node's container PIDs as bench_gpu_collect does.
# Every BIN runs `agent --root NODE --nvml-library FAKE --rocm-library none`
# plus ARGS (-e, e.g. '--store=false'), with its own port and data folder.
# After SECONDS (default 420) each gets 5 gzip'd scrapes of /metrics; then
# VmRSS of each is read from /proc/PID/status every 10 ms for SAMPLE_SECONDS
# (default 60). Prints max, mean and min per BIN. Running them together
# makes them see the same machine: compare within a run, not across runs.
#
# The node's counters move as on a busy node (python3 rewrites them every
# second, each file replaced whole, as the kernel's are read whole): every
# container's CPU time and periods, throttling in one container of 7, memory
# pressure in one of 5, io pressure in one of 3. -f keeps them fixed (the
# fixture as written, which compresses better than any real node).
#
# -c CPUS gives the node that many CPUs (the fixture has 4; an 8-GPU
# server has 100 to 224): /proc/stat, /proc/cpuinfo, softnet_stat, and each
# CPU's topology and cpufreq folders, its times and frequency moving too.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=420
sample=60
extra=""
tick=1
cpus=0
while getopts "s:S:e:fc:" o; do
    case $o in
    s) seconds=$OPTARG ;;
    S) sample=$OPTARG ;;
    e) extra=$OPTARG ;;
    f) tick=0 ;;
    c) cpus=$OPTARG ;;
    *) exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { echo "usage: $0 [-s SECONDS] [-S SAMPLE_SECONDS] [-e ARGS] [-f] [-c CPUS] BIN..." >&2; exit 2; }
lib=${FAKE_LIBNVML:-build/tests/fakenvml/libnvidia-ml.so.1}
[ -f "$lib" ] || { echo "no fake NVML at $lib (make, or set FAKE_LIBNVML)" >&2; exit 1; }

work=$(mktemp -d /tmp/mlwatch-rss-XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
tests/fixtures/generate-node.sh 299 "$work/node" >/dev/null

# The scenario of bench_gpu_collect's write_scenario(8, 13, 1).
mapfile -t node_pids < <(find "$work/node/sys/fs/cgroup/kubepods.slice" -name cgroup.procs \
    -path '*cri-containerd*' -exec cat {} +)
{
    for g in 0 1 2 3 4 5 6 7; do
        printf 'gpu %d name="NVIDIA H100 80GB HBM3" uuid=GPU-%08d bus=00000000:%02X:00.0 ' \
            $g $g $((0x18 + g))
        printf 'numa=%d cpus=0-47 util=%d memutil=30 memtotal=85520809984 memused=40000000000 ' \
            $((g / 4)) $((50 + g))
        printf 'power_mw=500000 limit_mw=700000 energy_mj=123456789 temp=50 sm_mhz=1980 '
        printf 'sm_max_mhz=1980 mem_mhz=2619 mem_max_mhz=2619 reasons=1 ecc_corrected=1 '
        printf 'remapped=0,0,0,0 pcie_gen=5 pcie_gen_max=5 pcie_width=16 pcie_width_max=16\n'
        for l in $(seq 0 17); do echo "nvlink gpu=$g link=$l crc_flit=$l"; done
        for p in $(seq 0 12); do
            echo "proc gpu=$g pid=${node_pids[$(((g * 13 + p) % ${#node_pids[@]}))]} mem=$((1 << 28)) sm=$((p % 90 + 1))"
        done
    done
} >"$work/scenario.txt"

if [ "$cpus" -gt 0 ] || [ $tick = 1 ]; then
    # Writes the CPUs once, then (unless -f) moves the counters every second.
    python3 - "$work/node" "$cpus" "$tick" <<'PY' &
import os, sys, time
node, ncpus, tick = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
dirs = sorted(d for d, _, files in os.walk(node + "/sys/fs/cgroup/kubepods.slice")
              if "cri-containerd" in d and "cgroup.procs" in files)
def write(path, text):
    with open(path + ".new", "w") as f:
        f.write(text)
    os.replace(path + ".new", path)
stat_rest = [l for l in open(node + "/proc/stat") if not l.startswith("cpu")]
def write_stat(t):
    lines = ["cpu%d %d 1000 %d %d 2000 0 3000 0 0 0\n"
             % (c, 3000000 + 60 * t + c, 800000 + 20 * t, 9000000 + 20 * t)
             for c in range(ncpus)]
    total = [sum(int(l.split()[k]) for l in lines) for k in range(1, 11)]
    write(node + "/proc/stat", "cpu  " + " ".join(map(str, total)) + "\n" + "".join(lines)
          + "".join(stat_rest))
if ncpus:
    block = open(node + "/proc/cpuinfo").read().split("\n\n")[0]
    info = []
    for c in range(ncpus):
        b = [("processor\t: %d" % c) if l.startswith("processor") else
             ("core id\t\t: %d" % (c % (ncpus // 2) // 1)) if l.startswith("core id") else
             ("physical id\t: %d" % (c * 2 // ncpus)) if l.startswith("physical id") else
             ("siblings\t: %d" % (ncpus // 2)) if l.startswith("siblings") else l
             for l in block.split("\n")]
        info.append("\n".join(b))
    write(node + "/proc/cpuinfo", "\n\n".join(info) + "\n\n")
    write(node + "/proc/net/softnet_stat",
          "".join("00a1b2c3 00000003 00000041 00000000 00000000 00000000 00000000 00000000 "
                  "00000000 0000001f 00000000 00000000 %08x\n" % c for c in range(ncpus)))
    sysc = node + "/sys/devices/system/cpu"
    for f in ("online", "present", "possible"):
        write(sysc + "/" + f, "0-%d\n" % (ncpus - 1))
    half = ncpus // 2
    for c in range(ncpus):
        top = "%s/cpu%d/topology" % (sysc, c)
        os.makedirs(top, exist_ok=True)
        pkg = c * 2 // ncpus
        for name, v in (("core_id", c % half), ("die_id", 0), ("physical_package_id", pkg),
                        ("core_cpus_list", "%d,%d" % (c % half, c % half + half)),
                        ("package_cpus_list", "%d-%d" % (pkg * half, pkg * half + half - 1))):
            write("%s/%s" % (top, name), "%s\n" % v)
        freq = "%s/cpu%d/cpufreq" % (sysc, c)
        os.makedirs(freq, exist_ok=True)
        for name, v in (("affected_cpus", c), ("related_cpus", c), ("base_frequency", 2100000),
                        ("cpuinfo_max_freq", 3900000), ("cpuinfo_min_freq", 800000),
                        ("scaling_cur_freq", 2400000), ("scaling_driver", "intel_pstate"),
                        ("scaling_governor", "performance"), ("scaling_max_freq", 3900000),
                        ("scaling_min_freq", 800000),
                        ("scaling_available_governors", "performance powersave")):
            write("%s/%s" % (freq, name), "%s\n" % v)
    write_stat(0)
if not tick:
    sys.exit(0)
def psi(some, full):
    return ("some avg10=0.00 avg60=0.00 avg300=0.00 total=%d\n"
            "full avg10=0.00 avg60=0.00 avg300=0.00 total=%d\n" % (some, full))
t = 0
while True:
    t += 1
    for i, d in enumerate(dirs):
        usage = 1000000 * (i + 1) + t * (50000 + i * 7919 % 900000)
        throttled = t * (i % 7 == 0)
        write(d + "/cpu.stat",
              "usage_usec %d\nuser_usec %d\nsystem_usec %d\ncore_sched.force_idle_usec 0\n"
              "nr_periods %d\nnr_throttled %d\nthrottled_usec %d\nnr_bursts 0\nburst_usec 0\n"
              % (usage, usage * 7 // 10, usage - usage * 7 // 10, 100 + i + 10 * t,
                 i % 7 + throttled, 1000 * i + 20000 * throttled))
        write(d + "/cpu.pressure", psi(1000 * t, 0))
        write(d + "/memory.pressure", psi(150 * t * (i % 5 == 0), 50 * t * (i % 5 == 0)))
        write(d + "/io.pressure", psi(3000 * t * (i % 3 == 0), 1000 * t * (i % 3 == 0)))
    if ncpus:
        write_stat(t)
        for c in range(ncpus):
            write("%s/sys/devices/system/cpu/cpu%d/cpufreq/scaling_cur_freq" % (node, c),
                  "%d\n" % (2400000 + (c * 7 + t) % 13 * 100000))
    time.sleep(1)
PY
    pids+=($!)
    sleep 2 # the CPUs written before the agents start
fi
port=19430
ports=()
agents=()
for bin in "$@"; do
    mkdir -p "$work/data-$port"
    # shellcheck disable=SC2086 # ARGS are words
    FAKE_NVML_SCENARIO=$work/scenario.txt FAKE_NVML_RELOAD=0 \
        "$bin" agent --root "$work/node" --listen "127.0.0.1:$port" --nvml-library "$lib" \
        --rocm-library none --data-dir "$work/data-$port" --state-dir "$work/data-$port" \
        --log-level error $extra &
    pids+=($!)
    agents+=($!)
    ports+=("$port")
    port=$((port + 1))
done
echo "$(date -u +%H:%M) UTC: ${#agents[@]} agents started, sampling after $seconds s" >&2
sleep "$seconds"
for p in "${ports[@]}"; do
    for _ in 1 2 3 4 5; do curl -s --compressed -o /dev/null "http://127.0.0.1:$p/metrics"; done
done

declare -A max min sum
n=0
end=$((SECONDS + sample))
while [ $SECONDS -lt $end ]; do
    for i in "${!agents[@]}"; do
        while read -r k v _; do
            [ "$k" = VmRSS: ] || continue
            [ "${max[$i]:-0}" -ge "$v" ] || max[$i]=$v
            [ "${min[$i]:-999999999}" -le "$v" ] || min[$i]=$v
            sum[$i]=$((${sum[$i]:-0} + v))
            break
        done <"/proc/${agents[$i]}/status"
    done
    n=$((n + 1))
    sleep 0.01
done
printf '%-40s %10s %10s %10s  (MiB, %d samples)\n' agent max mean min "$n"
args=("$@")
for i in "${!agents[@]}"; do
    awk -v b="${args[$i]}" -v mx="${max[$i]}" -v s="${sum[$i]}" -v n="$n" -v mn="${min[$i]}" \
        'BEGIN { printf "%-40s %10.2f %10.2f %10.2f\n", b, mx / 1024, s / n / 1024, mn / 1024 }'
done
