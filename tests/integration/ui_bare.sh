#!/usr/bin/env bash
# ui_bare.sh - the web UI on a plain VM, in Debian's chromium (headless,
# driven by playwright-core; tests/integration/ui/check.js): the bare-vm
# fixture with no GPU (the NVML library is not there), no pods, no RAPL and
# hybrid cgroups holding four systemd services (tests/integration/ui/
# bare_world.py moves their counters and /proc/stat).
#   - GET /api/v1/status/sources says what the agent sees and why not;
#   - the overview shows the machine (OS, CPUs, memory, cgroup mode, no
#     Kubernetes), what mlwatch cannot see and why (no NVML library, no RAPL
#     so the energy is estimated, no pods so services are the workloads),
#     node power and energy marked estimated, the services by CPU and memory,
#     the busiest processes of its /proc exactly (command, user, memory,
#     count, in order);
#   - every page: each empty panel says what is missing and how to enable it,
#     legends, tables and axis labels fit at 1400 and 800 px, units agree
#     (layout.js); screenshots in $MLWATCH_BUILD/artifacts/ui/bare/ (CI keeps them).
source "$(dirname "$0")/lib.sh"
: "${MLWATCH_BUILD:=$MLWATCH_SRC/build}"
command -v node >/dev/null || fail "node is not installed (scripts/install-deps.sh test)"
[ -x /usr/bin/chromium ] || fail "chromium is not installed (scripts/install-deps.sh test)"
[ -d "$MLWATCH_SRC/ui/node_modules/playwright-core" ] ||
    fail "ui/node_modules is missing: run 'npm ci' in ui/ (scripts/install-deps.sh test)"
SHOTS=$(cd "$MLWATCH_BUILD" && pwd)/artifacts/ui/bare # kept by CI (.ci/run)
rm -rf "$SHOTS"
mkdir -p "$SHOTS"

root=$(fixture_copy bare-vm)
python3 "$MLWATCH_SRC/tests/integration/ui/bare_world.py" "$root" 0.25 &
PIDS+=($!)
wait_for 10 test -f "$root/.ready" || fail "bare_world.py did not start"
nvml=$WORK/no-such-dir/libnvidia-ml.so.1
start_agent --root "$root" --nvml-library "$nvml" --rocm-library none --interval 250ms \
    --collectors cpu,cpuinfo,cpufreq,numa,pressure,memory,rapl,cgroup,gpu,osinfo,self,processes \
    --process-top 6
A=$AGENT_URL

expect_eq "sources" '{"cgroup":{"detail":"hybrid: cgroup v1 controllers at sys/fs/cgroup/cpu,cpuacct, cgroup v2 at sys/fs/cgroup/unified","state":"seen"},"gpu":{"detail":"no GPU telemetry: NVML: '"$nvml"': cannot open shared object file: No such file or directory; ROCm SMI: switched off (--rocm-library none)","state":"absent"},"kubernetes":{"detail":"the Kubernetes API is not asked (--kubernetes=false): pods are named from their cgroups and the kubelet'"'"'s logs, without workload labels","state":"off"},"rapl":{"detail":"no RAPL energy counters (sys/class/powercap is missing): the CPU'"'"'s energy is estimated from CPU time","state":"absent"}}' \
    "$(curl -s "$A/api/v1/status/sources" | jq -cS .data)"

# A few seconds of rates, and the hybrid host's service pressure.
q() { curl -s --get --data-urlencode "query=$1" "$A/api/v1/query" |
    python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")'; }
q_is() { [ "$(q "$1")" = "$2" ]; }
WAIT_EVERY=0.2 wait_for 20 q_is 'count(mlwatch_container_pressure_stalled_seconds_total{cgroup="/system.slice/postgresql.service"})' 2 ||
    fail "no pressure from unified/ for postgresql.service: $(curl -s "$A/metrics" | grep -c container_pressure)"
findings_in() { curl -s "$A/api/v1/findings" | jq -e '[.findings[].kind] | index("memory_pressure") and index("cpu_throttling")' >/dev/null; }
WAIT_EVERY=0.3 wait_for 20 findings_in || fail "the doctor found no throttling and memory pressure: $(curl -s "$A/api/v1/findings")"
sleep 2

# The busiest processes of bare_world.py's /proc (CPU 1.5, 0.9, 0.5, 0.25,
# 0.1, 0 cores; pages x 4096 bytes): exactly these rows, postgres first (the
# order of the others is the CPU over one interval of a loaded machine, a
# few ticks: unit_processes tests the order); the kernel thread left out,
# bash (7th: 0 cores, less memory than systemd) cut by --process-top 6.
procs='{"command":"postgres","user":"postgres","Memory":251658240,"Processes":2},{"command":"nginx","user":"www-data","Memory":52428800,"Processes":1},{"command":"python3","user":"alice","Memory":268435456,"Processes":1},{"command":"sshd","user":"root","Memory":8388608,"Processes":1},{"command":"cron","user":"root","Memory":16777216,"Processes":1},{"command":"systemd","user":"root","Memory":12582912,"Processes":1}'
svcs='"/system.slice/cron.service","/system.slice/nginx.service","/system.slice/postgresql.service","/system.slice/ssh.service"'
gpu_why='No GPU use by a workload.*This agent: no GPU telemetry: NVML: .*libnvidia-ml.so.1: cannot open shared object file'
cat >"$WORK/expect.json" <<JSON
{"only_pages": true, "pages": {
  "overview": {"count": 14, "empty": ["overview-9", "overview-13"], "mayBeEmpty": ["overview-12"], "panels": {
    "overview-1": {"facts": {"Operating system": "^Debian GNU/Linux 12 \\\\(bookworm\\\\)$", "CPUs (threads)": "^2$",
      "Memory": "^3.83 GiB$", "GPUs": "^0$", "GPU models": "^none$", "cgroups": "^hybrid: cgroup v1 controllers",
      "Kubernetes pods": "^0 · the Kubernetes API is not asked"}},
    "overview-2": {"facts": {"GPUs": "^none seen: no GPU telemetry: NVML: .*libnvidia-ml.so.1: cannot open shared object file",
      "Energy": "^estimated: no RAPL energy counters", "Workloads": "^no pods: showing systemd services, Docker containers and Slurm jobs as workloads \\\\(4 systemd services, 0 Docker containers, 0 Slurm jobs\\\\)$",
      "CO2": "^No CO2: no carbon intensity is configured",
      "Processes": "^the 6 busiest commands by CPU and user \\\\(Busiest processes below\\\\)"}},
    "overview-3": {"values": ["estimated"]}, "overview-4": {"values": ["estimated"]},
    "overview-6": {"value": 0}, "overview-7": {"labels": ["estimated"]},
    "overview-8": {"labels": [$svcs]}, "overview-9": {"why": "$gpu_why"},
    "overview-10": {"labels": [$svcs]},
    "overview-11": {"rowSet": {"workload": ["(system share)", "(unreserved share)", $svcs]}},
    "overview-13": {"why": "No idle GPU sessions.*This agent: no GPU telemetry"},
    "overview-14": {"rowsAnyOrder": [$procs], "firstRow": {"command": "postgres", "user": "postgres"}}}},
  "whyslow": {"count": 2, "panels": {
    "whyslow-1": {"findings": ["^critical cpu_throttling /system.slice/postgresql.service$", "^(critical|warning) memory_pressure /system.slice/postgresql.service$"]},
    "whyslow-2": {"labelsInclude": ["cpu_throttling (critical)", "memory_pressure (critical)"]}}},
  "gpu": {"count": 12, "empty": ["gpu-1", "gpu-2", "gpu-3", "gpu-4", "gpu-5", "gpu-6", "gpu-7", "gpu-8", "gpu-9", "gpu-10", "gpu-11", "gpu-12"], "panels": {
    "gpu-1": {"why": "No GPU metrics: mlwatch reads NVIDIA GPUs through libnvidia-ml.so.1.*This agent: no GPU telemetry"},
    "gpu-10": {"why": "No MIG instances"}}},
  "workloads": {"count": 9, "empty": ["workloads-1", "workloads-2", "workloads-3", "workloads-8"], "panels": {
    "workloads-1": {"why": "$gpu_why"}, "workloads-4": {"labels": [$svcs]},
    "workloads-5": {"labelsInclude": ["/system.slice/postgresql.service"]}, "workloads-6": {"labels": [$svcs]},
    
    "workloads-8": {"why": "no carbon intensity is configured. Set --carbon-intensity"},
    "workloads-7": {"labels": [$svcs]}, "workloads-9": {"rowSet": {"workload": [$svcs]}}}},
  "cluster": {"count": 8, "empty": ["cluster-7", "cluster-8"], "panels": {"cluster-1": {"value": 0}}},
  "sustainability": {"count": 9, "empty": ["sustainability-1", "sustainability-2", "sustainability-3", "sustainability-4", "sustainability-6"], "panels": {
    "sustainability-5": {"labels": ["estimated"]}, "sustainability-7": {"labels": ["node total", "system", "unreserved", "workloads"]}}},
  "node": {"count": 6, "mayBeEmpty": ["node-1", "node-2", "node-3"], "empty": ["node-5", "node-6"], "panels": {}}
}}
JSON
(cd "$WORK" && timeout 120 node "$MLWATCH_SRC/tests/integration/ui/check.js" "$A" "$SHOTS" "$WORK/expect.json") ||
    fail "the browser check failed (agent log: $(tail -5 "$WORK/agent.log"))"
ok
echo "ui_bare: $CHECKS checks passed; screenshots in $SHOTS"
