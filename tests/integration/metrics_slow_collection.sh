#!/usr/bin/env bash
# metrics_slow_collection.sh - a scrape never waits for a collection round
# under way (docs/http.md): while a collector is stuck (its /proc/loadavg is
# a FIFO that nobody writes, as a hung file system would be), /metrics
# answers 200 with the last complete round, in every format, and /-/ready
# stays 200; once the round ends, its values are served. The rounds are told
# apart by the load average each one read, not by time.
source "$(dirname "$0")/lib.sh"

root=$(fixture_copy rapl-cpufreq)
loadavg="$root/proc/loadavg"
echo '1.25 1.00 0.75 3/100 42' >"$loadavg"
start_agent --root "$root" --interval 200ms
load1() { # the value of mlwatch_load1 in a scrape (curl options: $@)
    curl -s "$@" "$AGENT_URL/metrics" | sed -n 's/^mlwatch_load1{node="t1"} //p'
}
load1_is() { [ "$(load1)" = "$1" ]; }
WAIT_EVERY=0.1 wait_for 5 load1_is 1.25 || fail "mlwatch_load1 is '$(load1)', not 1.25"
ok

# feed.py FIFO MARK TEXT: waits until a reader has the FIFO open (an open
# for writing without blocking succeeds only then: the round is stuck in
# the loadavg collector), says so in MARK.stuck, then writes TEXT once
# MARK.go exists.
cat >"$WORK/feed.py" <<'PY'
import errno, os, sys, time
fifo, mark, text = sys.argv[1], sys.argv[2], sys.argv[3]
while True:
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        break
    except OSError as e:
        if e.errno != errno.ENXIO:
            raise
        time.sleep(0.02)
open(mark + ".stuck", "w").close()
while not os.path.exists(mark + ".go"):
    time.sleep(0.02)
os.set_blocking(fd, True)
os.write(fd, text.encode())
os.close(fd)
PY
mark="$WORK/feed"
stuck_round() { # TEXT: the next round blocks on the FIFO until release
    rm -f "$mark.stuck" "$mark.go"
    # In the root (the agent resolves its paths inside it), renamed over
    # the file: a round opens either the file or the FIFO, never nothing.
    # Once it is a FIFO, it stays the same one: the round after a fed one
    # is already waiting on it.
    if [ ! -p "$loadavg" ]; then
        mkfifo "$loadavg.fifo"
        mv -T "$loadavg.fifo" "$loadavg"
    fi
    python3 "$WORK/feed.py" "$loadavg" "$mark" "$1" &
    FEED_PID=$!
    PIDS+=("$FEED_PID")
    wait_for 10 test -e "$mark.stuck" || fail "no round opened the FIFO"
}
release() {
    touch "$mark.go"
    wait "$FEED_PID"
}

# A round stuck for 6 s: more than 30 intervals, and more than the 5 s a
# scrape used to wait for the round under way before it answered 503.
stuck_round '2.50 1.00 0.75 3/100 42'
for i in 1 2 3; do
    expect_eq "mlwatch_load1 (text) while the round is stuck, scrape $i" 1.25 "$(load1)"
    expect_eq "mlwatch_load1 (gzip) while the round is stuck, scrape $i" 1.25 "$(load1 --compressed)"
    expect_eq "mlwatch_load1 (OpenMetrics) while the round is stuck, scrape $i" 1.25 \
        "$(load1 -H 'Accept: application/openmetrics-text; version=1.0.0')"
    expect_eq "/metrics status while the round is stuck" 200 "$(curl -s -o /dev/null -w '%{http_code}' "$AGENT_URL/metrics")"
    expect_eq "/-/ready while the round is stuck" 200 "$(curl -s -o /dev/null -w '%{http_code}' "$AGENT_URL/-/ready")"
    sleep 2
done
expect_eq "the round is still stuck (its feeder still waits)" running "$(exited "$FEED_PID" && echo exited || echo running)"
release
WAIT_EVERY=0.1 wait_for 5 load1_is 2.5 || fail "after the stuck round, mlwatch_load1 is '$(load1)', not 2.5"
ok
# The stuck round's own cost shows in the round after it.
dur=$(curl -s "$AGENT_URL/metrics" | sed -n 's/^mlwatch_collector_duration_seconds{collector="loadavg",node="t1"} //p')
awk -v d="$dur" 'BEGIN { exit !(d >= 6) }' || fail "loadavg's duration after a 6 s stall is '$dur'"
ok

# The next round is stuck too (the FIFO again, nobody writing): the round
# that ended is served until this one ends.
stuck_round '3.75 1.00 0.75 3/100 42'
expect_eq "mlwatch_load1 while the second round is stuck" 2.5 "$(load1)"
release
WAIT_EVERY=0.1 wait_for 5 load1_is 3.75 || fail "after the second stuck round, mlwatch_load1 is '$(load1)', not 3.75"
ok
# A regular file again, so that the agent stops at once: the round waiting
# on the FIFO is fed once the file has replaced it.
stuck_round '1.25 1.00 0.75 3/100 42'
echo '1.25 1.00 0.75 3/100 42' >"$loadavg.new" && mv -T "$loadavg.new" "$loadavg"
release
WAIT_EVERY=0.1 wait_for 5 load1_is 1.25 || fail "mlwatch_load1 is '$(load1)', not 1.25 again"
ok
done_ok
