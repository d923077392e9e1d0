#!/usr/bin/env bash
# wallclock_jump.sh - a step of the wall clock (an NTP step, a resumed VM)
# stalls neither WAL flushes nor remote-write shipping. The machine's clock
# is shared, so the agent runs under tests/fakeclock/fake_wallclock.c
# (LD_PRELOAD): once $WORK/jump exists, its wall clock is a year ahead
# while CLOCK_MONOTONIC and the kernel's timers stay real. A wait whose
# deadline comes from the wall clock then lasts a year, as it would after
# a real step back; waits on CLOCK_MONOTONIC do not notice.
# 1. WAL: the agent's own samples are appended without waiting and made
#    durable by the store's maintenance thread each second: fsyncs go on
#    after the jump.
# 2. Shipping: with --interval 15s, a batch the receiver refuses (503) is
#    sent again after its backoff (100 ms, 200 ms), not at the next cycle.
source "$(dirname "$0")/lib.sh"
shim="$MLWATCH_BUILD/tests/fakeclock/libfake_wallclock.so"
[ -f "$shim" ] || fail "$shim is not built"
# Only the agent runs under the shim (through a wrapper that start_agent
# runs; curl and the receiver do not); a sanitized build must find its
# runtime first in the library list.
asan=$(ldd "$MLWATCH_BIN" | awk '/libasan/ {print $3}')
printf '#!/bin/sh\nLD_PRELOAD="%s" exec "%s" "$@"\n' "${asan:+$asan }$shim" "$MLWATCH_BIN" >"$WORK/mlwatch"
chmod +x "$WORK/mlwatch"
MLWATCH_BIN="$WORK/mlwatch"
export MW_FAKE_WALLCLOCK_TRIGGER="$WORK/jump" MW_FAKE_WALLCLOCK_JUMP_S=31536000
root=$(fixture_copy rapl-cpufreq)

fsyncs() { curl -s "$AGENT_URL/metrics" | awk '$1 == "mlwatch_store_wal_fsyncs_total{node=\"t1\"}" {print $2}'; }
at_least() { [ "$("$1")" -ge "$2" ]; }
jumped() { grep -q 'fake_wallclock: the wall clock jumped' "$WORK/agent.log"; }

# ---- 1. WAL flushes ----
start_agent --root "$root" --interval 500ms
wait_for 20 at_least fsyncs 2 || fail "no WAL fsyncs before the jump: $(fsyncs)"
ok
touch "$WORK/jump"
wait_for 10 jumped || fail "the shim did not make the wall clock jump"
ok
# The wait under way at the jump was taken before it; the ones after count.
sleep 1.5
before=$(fsyncs)
wait_for 10 at_least fsyncs $((before + 3)) ||
    fail "WAL flushes stalled after the wall clock jumped: $(fsyncs) fsyncs now, $before 1.5 s after the jump (3 more expected within 10 s)"
echo "WAL fsyncs after the jump: $before, then $(fsyncs)"
ok
stop_process "$AGENT_PID"
rm -rf "$WORK/jump" "$WORK/data" # samples a year ahead: not for the next agent

# ---- 2. Remote-write shipping ----
: >"$WORK/refuse"
python3 "$MLWATCH_SRC/tests/receivers/rw_counter.py" --port-file "$WORK/rx.port" \
    --out "$WORK/rx.log" --refuse-file "$WORK/refuse" &
PIDS+=($!)
wait_for 10 test -s "$WORK/rx.port" || fail "the receiver did not start"
cat >"$WORK/mlwatch.yml" <<YAML
remote_write:
  - url: http://127.0.0.1:$(cat "$WORK/rx.port")/api/v1/write
    queue_config: {max_shards: 1, batch_send_deadline: 100ms, min_backoff: 100ms, max_backoff: 200ms}
YAML
accepted() { [ "$(awk '$2 == 204' "$WORK/rx.log" 2>/dev/null | wc -l)" -ge "$1" ]; }
start_agent --root "$root" --interval 15s --config "$WORK/mlwatch.yml"
wait_for 20 accepted 1 || fail "the first cycle was not shipped: $(cat "$WORK/rx.log" 2>/dev/null)"
ok
# The next cycle's batch is refused twice, after the jump.
echo 2 >"$WORK/refuse"
touch "$WORK/jump"
refused() { [ "$(awk '$2 == 503' "$WORK/rx.log" | wc -l)" -ge 1 ]; }
wait_for 30 refused || fail "no request of the second cycle: $(cat "$WORK/rx.log")"
wait_for 10 jumped || fail "the shim did not make the wall clock jump"
first_refusal=$(awk '$2 == 503 {print $1; exit}' "$WORK/rx.log")
# 5 s: the retries are due 0.1 and 0.2 s after; the next cycle, 15 s.
wait_for 8 accepted 2 || true
retried_after=$(awk -v t="$first_refusal" '$2 == 204 && $1 > t {printf "%.1f\n", $1 - t; exit}' "$WORK/rx.log")
[ -n "$retried_after" ] && awk -v d="$retried_after" 'BEGIN {exit !(d < 5)}' ||
    fail "shipping stalled after the wall clock jumped: the refused batch was accepted again ${retried_after:+only $retried_after s after its first refusal}${retried_after:-not within 8 s} (receiver: $(tr '\n' ';' <"$WORK/rx.log"))"
echo "the refused batch was accepted again $retried_after s after its first refusal"
ok
done_ok
