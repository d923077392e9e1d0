#!/usr/bin/env bash
# run_systemd.sh - `mlwatch run` in a systemd transient scope. This host's
# PID 1 is not systemd, so a dbus-daemon of the test's own is the system bus
# (DBUS_SYSTEM_BUS_ADDRESS) and tests/fakeapi/fake_systemd.py is
# org.freedesktop.systemd1 on it, making scopes as systemd does (their
# cgroups under a folder of the cgroup v2 hierarchy, or v1 cpuacct, that
# stands for systemd's root; errors as systemd's; a scope's cgroup removed
# once its last process ends).
#   - auto where /run/systemd/system exists (systemd's own test, made in a
#     mount namespace of the test) asks for mlwatch-run-PID.scope with the
#     command's process and a holder, exactly these properties; the report
#     says "systemd_scope" and names the scope and its cgroup; a daemon the
#     command starts counts (one sample after the command ended, with
#     --interval 30s: the holder keeps the scope until then); the scope is
#     gone after the run;
#   - auto without /run/systemd/system does not ask;
#   - a start job that fails (the root is no cgroup), an error answer (a
#     unit of that name exists) and no bus at all: a child cgroup instead,
#     saying why in the text and the JSON;
#   - a user who may make no cgroup gets a scope from the user's manager
#     (the user's bus).
source "$(dirname "$0")/lib.sh"

command -v dbus-daemon >/dev/null || fail "dbus-daemon is not installed (scripts/install-deps.sh test)"
/usr/bin/python3 -c 'import dbus, gi' 2>/dev/null || fail "python3-dbus and python3-gi are not installed"
command -v unshare >/dev/null || fail "unshare (util-linux) is needed"
[ "$(id -u)" = 0 ] || fail "needs root (a mount namespace, cgroups to make)"

# The hierarchy the fake makes scopes in, as systemd would: v2 (pure or the
# unified/ mount of a hybrid host), else v1 cpuacct.
cgmount=$(awk '$9 == "cgroup2" { print $5; exit }' /proc/self/mountinfo)
cgv=2
[ -n "$cgmount" ] || { cgv=1; cgmount=$(awk '$9 == "cgroup" && $NF ~ /cpuacct/ { print $5; exit }' /proc/self/mountinfo); }
[ -n "$cgmount" ] || fail "this host mounts neither cgroup v2 nor the v1 cpuacct hierarchy"
croot=$cgmount/mlwatch-test-systemd-$$
mkdir "$croot"
cleanup_cgroups() {
    rmdir "$croot"/*/*/* "$croot"/*/* "$croot"/* "$croot" 2>/dev/null || true
}
trap 'rc=$?; cleanup_cgroups; cleanup "$rc"' EXIT

cat >"$WORK/bus.conf" <<EOF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path=$WORK/system_bus_socket</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*" eavesdrop="true"/>
    <allow receive_sender="*"/>
  </policy>
</busconfig>
EOF
dbus-daemon --config-file="$WORK/bus.conf" --nofork --nopidfile 2>"$WORK/dbus.log" &
PIDS+=($!)
wait_for 10 test -S "$WORK/system_bus_socket" || fail "dbus-daemon did not start: $(cat "$WORK/dbus.log")"
export DBUS_SYSTEM_BUS_ADDRESS=unix:path=$WORK/system_bus_socket

start_fake() { # ROOT [FLAGS]: a fake systemd whose hierarchy root is ROOT
    rm -f "$WORK/fake.ready"
    local root=$1
    shift
    /usr/bin/python3 "$MLWATCH_SRC/tests/fakeapi/fake_systemd.py" --cgroup-root "$root" \
        --log "$WORK/calls.jsonl" --ready "$WORK/fake.ready" "$@" 2>>"$WORK/fake.log" &
    FAKE=$!
    PIDS+=($FAKE)
    wait_for 10 test -f "$WORK/fake.ready" || fail "fake_systemd.py did not start: $(cat "$WORK/fake.log")"
}
stop_fake() {
    kill "$FAKE"
    wait "$FAKE" || true
}
run() { "$MLWATCH_BIN" run --nvml-library none --rocm-library none --freeipmi-library none "$@"; }

# A daemon that burns a fixed loop of CPU, which the command waits for
# (energy_run.sh has the same).
daemon_cmd="(setsid sh -c 'awk \"BEGIN { for (i = 0; i < 15000000; i++) s += i; if (s < 0) print s }\";
  cat /proc/\$\$/stat > $WORK/st.tmp; mv $WORK/st.tmp $WORK/st' </dev/null >/dev/null 2>&1 &)
  while [ ! -f $WORK/st ]; do sleep 0.05; done"

# 1. auto, where systemd runs the machine: a scope.
start_fake "$croot"
: >"$WORK/calls.jsonl"
unshare -m sh -c 'mount -t tmpfs none /run && mkdir -p /run/systemd/system && exec "$@"' sh \
    "$MLWATCH_BIN" run --json --interval 30s --nvml-library none --rocm-library none \
    --freeipmi-library none -- sh -c "$daemon_cmd" 2>"$WORK/s.json" || fail "run in a scope: $(cat "$WORK/s.json")"
daemon_cpu=$(awk '{ printf "%.2f", ($16 + $17) / 100 }' "$WORK/st")
wait_for 5 grep -q '"removed"' "$WORK/calls.jsonl" || fail "the scope was not removed: $(cat "$WORK/calls.jsonl")"
python3 - "$WORK/s.json" "$WORK/calls.jsonl" "$daemon_cpu" "$croot" "$cgv" <<'PY' || fail "scope: $(cat "$WORK/s.json") calls: $(cat "$WORK/calls.jsonl")"
import json, re, sys
r = json.load(open(sys.argv[1]))
calls = [json.loads(l) for l in open(sys.argv[2])]
daemon, croot = float(sys.argv[3]), sys.argv[4]
assert len(calls) == 3, calls  # the call, its job's end, the removal
call, job, gone = calls
unit = call["name"]
assert re.fullmatch(r"mlwatch-run-[0-9]+\.scope", unit), unit
assert call["uid"] == 0 and call["mode"] == "fail" and call["aux"] == 0, call
props = call["properties"]
assert sorted(props) == ["CPUAccounting", "CollectMode", "Description", "PIDs"], props
assert props["Description"] == "mlwatch run sh" and props["CPUAccounting"] is True, props
assert props["CollectMode"] == "inactive-or-failed", props
assert len(props["PIDs"]) == 2, props  # the command and the holder
assert job == {"job": call["job"], "unit": unit, "result": "done"}, job
folder = f"{croot}/system.slice/{unit}"
assert gone == {"unit": unit, "removed": folder}, gone
assert r["tracking"] == "systemd_scope", r["tracking"]
v = sys.argv[5]
assert r["tracking_detail"] == f"systemd scope {unit}, cgroup v{v} {folder}", r["tracking_detail"]
assert daemon >= 0.1, daemon
assert daemon - 0.011 <= r["cpu_seconds"] <= daemon + 0.15, (r["cpu_seconds"], daemon)
PY
ok
# The text report says the same.
: >"$WORK/calls.jsonl"
unshare -m sh -c 'mount -t tmpfs none /run && mkdir -p /run/systemd/system && exec "$@"' sh \
    "$MLWATCH_BIN" run --nvml-library none --rocm-library none --freeipmi-library none -- true \
    2>"$WORK/s.txt" || fail "$(cat "$WORK/s.txt")"
grep -Eq "^  tracking         systemd scope mlwatch-run-[0-9]+\.scope, cgroup v$cgv $croot/system.slice/mlwatch-run-[0-9]+\.scope$" "$WORK/s.txt" ||
    fail "text report: $(cat "$WORK/s.txt")"
wait_for 5 grep -q '"removed"' "$WORK/calls.jsonl" || fail "the scope was not removed: $(cat "$WORK/calls.jsonl")"
ok

# 2. auto where /run/systemd/system does not exist (this host): no call.
: >"$WORK/calls.jsonl"
if [ ! -e /run/systemd/system ]; then
    run --json -- true 2>"$WORK/a.json" || fail "$(cat "$WORK/a.json")"
    expect_eq "auto without systemd: tracking" cgroup "$(jq -r .tracking "$WORK/a.json")"
    expect_eq "auto without systemd: calls" 0 "$(wc -l <"$WORK/calls.jsonl")"
fi

# 3. Failures fall back to a child cgroup and say why. The start job fails
# when the scope's folder is no cgroup (a plain folder as the root).
stop_fake
mkdir -p "$WORK/not-a-cgroup"
start_fake "$WORK/not-a-cgroup"
run --json --run-cgroup systemd -- true 2>"$WORK/f.json" || fail "$(cat "$WORK/f.json")"
expect_eq "failed job: tracking" cgroup "$(jq -r .tracking "$WORK/f.json")"
jq -r .tracking_detail "$WORK/f.json" | grep -Eq "^cgroup v[12] /sys/fs/cgroup/[^ ]*mlwatch-run-([0-9]+) \(no systemd scope: systemd: the start job of mlwatch-run-[0-9]+\.scope ended: failed\)$" ||
    fail "failed job: $(jq -r .tracking_detail "$WORK/f.json")"
ok
# An error answer: a unit of that name exists.
stop_fake
start_fake "$croot" --existing "$WORK/existing"
sh -c 'echo "mlwatch-run-$$.scope" >"$1/existing"; shift; exec "$@"' sh "$WORK" "$MLWATCH_BIN" run \
    --json --run-cgroup systemd --nvml-library none --rocm-library none --freeipmi-library none \
    -- true 2>"$WORK/x.json" || fail "$(cat "$WORK/x.json")"
unit=$(cat "$WORK/existing")
expect_eq "unit exists: tracking" cgroup "$(jq -r .tracking "$WORK/x.json")"
jq -r .tracking_detail "$WORK/x.json" | grep -Fq " (no systemd scope: systemd: StartTransientUnit $unit: org.freedesktop.systemd1.UnitExists: Unit $unit was already loaded or has a fragment file.)" ||
    fail "unit exists: $(jq -r .tracking_detail "$WORK/x.json")"
ok
# 4. A user who may make no cgroup: the scope of the user's own manager
# (systemd --user, on the user's bus: DBUS_SESSION_BUS_ADDRESS), where
# energy_run.sh shows the process tree for the same user.
stop_fake
mkdir -p "$croot/user@65534.service"
start_fake "$croot/user@65534.service" --user-manager 65534
chmod 755 "$WORK"
setpriv --reuid=65534 --regid=65534 --clear-groups env -u DBUS_SYSTEM_BUS_ADDRESS \
    DBUS_SESSION_BUS_ADDRESS="$DBUS_SYSTEM_BUS_ADDRESS" \
    "$MLWATCH_BIN" run --json --nvml-library none --rocm-library none --freeipmi-library none \
    --run-cgroup systemd -- true 2>"$WORK/u.json" || fail "$(cat "$WORK/u.json")"
expect_eq "user manager: tracking" systemd_scope "$(jq -r .tracking "$WORK/u.json")"
jq -r .tracking_detail "$WORK/u.json" | grep -Eq "^systemd scope mlwatch-run-[0-9]+\.scope, cgroup v$cgv $croot/user@65534.service/app.slice/mlwatch-run-[0-9]+\.scope$" ||
    fail "user manager: $(jq -r .tracking_detail "$WORK/u.json")"
expect_eq "user manager: the call's uid" 65534 "$(grep '"uid"' "$WORK/calls.jsonl" | tail -n1 | jq .uid)"
ok
# No bus at all.
DBUS_SYSTEM_BUS_ADDRESS=unix:path=$WORK/no-such-socket run --run-cgroup systemd -- true 2>"$WORK/n.txt" ||
    fail "$(cat "$WORK/n.txt")"
grep -Eq "^  tracking         cgroup v[12] /sys/fs/cgroup/[^ ]*mlwatch-run-[0-9]+ \(no systemd scope: systemd: the system bus: No such file or directory\)$" "$WORK/n.txt" ||
    fail "no bus: $(cat "$WORK/n.txt")"
ok
gone() { ! ls -d "$croot"/*/*.scope "$croot"/*/*/*.scope >/dev/null 2>&1; }
wait_for 5 gone || fail "a scope was left behind: $(ls -d "$croot"/*/*.scope "$croot"/*/*/*.scope)"
echo "run_systemd: $CHECKS checks passed"
