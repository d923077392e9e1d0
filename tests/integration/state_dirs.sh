#!/usr/bin/env bash
# state_dirs.sh - one folder for an agent's state (docs/configuration.md,
# docs/energy.md "Restarts", docs/idle.md): two agents on one machine with
# different --data-dir and no --state-dir, each with energy totals and
# idle-notification state being written, run under strace: every file
# either creates, writes, renames or removes is under its own data folder
# (or /dev), neither names the other's folder nor /var/lib/mlwatch at all;
# each has its energy and notification state under DATA_DIR/state. Then
# the deprecated --state-dir: a warning, and an older agent's
# idle-notifications.json and energy-state.json in it migrated once.
source "$(dirname "$0")/lib.sh"

: "${MLWATCH_BUILD:=$MLWATCH_SRC/build}"
fake=$MLWATCH_BUILD/tests/fakenvml/libnvidia-ml.so.1
[ -f "$fake" ] || fail "fake NVML library not built: $fake"
command -v strace >/dev/null || fail "strace is needed (apt-get install strace)"
export FAKE_NVML_SCENARIO=$WORK/scenario.txt
# Two idle GPUs held by pods: notification episodes open after 1 s.
cat >"$WORK/scenario.txt" <<EOF
system driver=550.54.15
gpu 0 name="NVIDIA H100 80GB HBM3" uuid=GPU-00000000-0000-4000-8000-000000000000 bus=00000000:18:00.0
gpu 0 util=0 memtotal=85520809984 memused=2147483648 power_mw=100000
gpu 1 name="NVIDIA H100 80GB HBM3" uuid=GPU-11111111-0000-4000-8000-000000000001 bus=00000000:28:00.0
gpu 1 util=80 memtotal=85520809984 memused=4294967296 power_mw=600000
gpu 2 name="NVIDIA H100 80GB HBM3" uuid=GPU-22222222-0000-4000-8000-000000000002 bus=00000000:38:00.0
gpu 2 util=0 memtotal=85520809984 memused=2147483648 power_mw=120000
proc gpu=0 pid=4001 mem=1073741824
proc gpu=1 pid=3001 mem=4000000000
proc gpu=2 pid=4002 mem=1073741824
EOF
# A receiver nobody listens on: the notifier keeps its episodes (and
# retries), which is what is written to its state file.
common=(--root "$MLWATCH_FIXTURES/gpu-node" --collectors cgroup,gpu,cpu --nvml-library "$fake"
    --rocm-library none --interval 200ms --gpu-process-interval 200ms --idle-window 1s
    --notify-webhook "http://127.0.0.1:$(free_port)/hook" --notify-repeat-interval 1h
    --node-name gpu-node-1)

# A wrapper that runs the agent under strace, every thread, paths of the
# descriptors shown (-y), so that *at calls relative to a folder are whole.
traced() { # NAME: writes $WORK/traced-NAME
    cat >"$WORK/traced-$1" <<EOF
#!/bin/sh
exec strace -f -qq -y -s 4096 -o "$WORK/$1.trace" \
    -e trace=open,openat,openat2,creat,mkdir,mkdirat,rename,renameat,renameat2,unlink,unlinkat,link,linkat,symlink,symlinkat,truncate,chmod,fchmodat,rmdir \
    "$MLWATCH_BIN" "\$@"
EOF
    chmod +x "$WORK/traced-$1"
}
# The agent itself is strace's child: stopped by its own pid.
stop_traced() { # STRACE_PID
    local agent
    agent=$(pgrep -P "$1" -x mlwatch) || fail "no agent under strace $1"
    kill -TERM "$agent"
    for _ in $(seq 1 100); do exited "$1" && break; sleep 0.1; done
    exited "$1" || fail "the agent under strace $1 did not stop"
}

stop_agent() {
    kill -TERM "$AGENT_PID"
    wait "$AGENT_PID" || fail "the agent stopped with status $?"
}
state_files() { # DIR: the state files, sorted
    (cd "$1/state" && ls | sort | tr '\n' ' ' | sed 's/ $//')
}

declare -A pid url
for n in a b; do
    traced "$n"
    MLWATCH_BIN=$WORK/traced-$n start_agent "${common[@]}" --data-dir "$WORK/data-$n"
    pid[$n]=$AGENT_PID
    url[$n]=$AGENT_URL
    cp "$WORK/agent.log" "$WORK/agent-$n.log"
done
# Both have open episodes and saved energy totals.
episodes() { curl -s "$1/metrics" | grep '^mlwatch_idle_gpu_sessions{namespace="shared",node="gpu-node-1"} 2$' >/dev/null; }
for n in a b; do
    WAIT_EVERY=0.2 wait_for 20 episodes "${url[$n]}" || fail "agent $n: no idle sessions"
    WAIT_EVERY=0.2 wait_for 20 test -s "$WORK/data-$n/state/idle-notifications.json" ||
        fail "agent $n: no notification state in $WORK/data-$n/state"
done
sleep 1
for n in a b; do stop_traced "${pid[$n]}"; done
for n in a b; do
    expect_eq "agent $n: its state files" "energy-state.json idle-notifications.json workloads.json" \
        "$(state_files "$WORK/data-$n")"
    grep -q '"key": *"shared/notebook-a/main/0"' "$WORK/data-$n/state/idle-notifications.json" ||
        fail "agent $n: notification state: $(head -c 300 "$WORK/data-$n/state/idle-notifications.json")"
    ok
    grep -q 'state-dir' "$WORK/agent-$n.log" && fail "agent $n warns of --state-dir: $(grep state-dir "$WORK/agent-$n.log")"
    # What each one wrote, created, renamed or removed: under its own folder.
    other=$([ "$n" = a ] && echo b || echo a)
    python3 - "$WORK/$n.trace" "$WORK/data-$n" "$WORK/data-$other" <<'PY' || fail "agent $n wrote outside its data folder"
import re, sys
trace, own, other = sys.argv[1], sys.argv[2], sys.argv[3]
text = open(trace, errors="replace").read()
bad = []
for name in (other, "/var/lib/mlwatch"):
    if name in text:
        bad.append(f"names {name}: " + next(l for l in text.splitlines() if name in l))
call = re.compile(r'^\d+ +(\w+)\((.*)\) += (-?\d+|\?)')
arg = re.compile(r'(?:(\d+|AT_FDCWD)(?:<([^>]*)>)?, *)?"((?:[^"\\]|\\.)*)"')
seen = 0
for line in text.splitlines():
    m = call.match(line)
    if not m or m.group(3).startswith("-"):
        continue  # unfinished, resumed or failed calls write nothing
    fn, args = m.group(1), m.group(2)
    if fn in ("open", "openat", "openat2", "creat"):
        if fn != "creat" and not re.search(r'O_WRONLY|O_RDWR|O_CREAT|O_TRUNC', args):
            continue
    paths = []
    for a in arg.finditer(args):
        base, rel = a.group(2), a.group(3)
        paths.append(rel if rel.startswith("/") or not base else base + "/" + rel)
    for p in paths[:2]:
        seen += 1
        if not (p == own or p.startswith(own + "/") or p.startswith("/dev/")):
            bad.append(f"{fn}: {p}: {line[:300]}")
if bad:
    print("\n".join(bad[:20]))
    sys.exit(1)
assert seen >= 10, f"only {seen} writes seen: is the trace empty?"
PY
    ok
done

# The deprecated --state-dir: an older agent's files there (a notification
# table and a version 1 energy state, as energy_restart.sh's) are taken
# once into DATA_DIR/state; the agent says --state-dir is deprecated.
old=$WORK/old-state
mkdir -p "$old"
cp "$WORK/data-a/state/idle-notifications.json" "$old/idle-notifications.json"
start_agent "${common[@]}" --data-dir "$WORK/data-c" --state-dir "$old"
expect_eq "deprecation warning" 1 "$(grep -c "warn agent: --state-dir is deprecated: all state lives under --data-dir ($WORK/data-c/state); an older agent's state files in $old are migrated there once" "$WORK/agent.log")"
grep -q "info notify: notification state migrated from $old/idle-notifications.json to $WORK/data-c/state/idle-notifications.json (the old file is now $old/idle-notifications.json.migrated)" "$WORK/agent.log" ||
    fail "no migration line: $(grep -i notif "$WORK/agent.log")"
ok
expect_eq "old file set aside" "idle-notifications.json.migrated" "$(ls "$old")"
grep -q '"key": *"shared/notebook-a/main/0"' "$WORK/data-c/state/idle-notifications.json" || fail "not migrated"
ok
stop_agent
# Once: the agent started again migrates nothing (the file put back stays).
cp "$old/idle-notifications.json.migrated" "$old/idle-notifications.json"
start_agent "${common[@]}" --data-dir "$WORK/data-c" --state-dir "$old"
expect_eq "migrated once" 0 "$(grep -c 'migrated from' "$WORK/agent.log" || true)"
expect_eq "the file put back stays" "idle-notifications.json idle-notifications.json.migrated" "$(ls "$old" | tr '\n' ' ' | sed 's/ $//')"
stop_agent
done_ok
