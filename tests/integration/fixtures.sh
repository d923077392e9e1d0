#!/usr/bin/env bash
# fixtures.sh - `mlwatch metrics --root` on every fixture node: the output
# passes the real `promtool check metrics`, no collector reports an error on
# these well-formed trees, and every stable sample equals the reviewed
# expectation in tests/golden/NAME.prom (the unit tests derive the same values
# from the fixture files by hand; this catches any change in the exposition
# as a whole). Regenerate after an intended change with UPDATE_GOLDEN=1 and
# review the diff.
source "$(dirname "$0")/lib.sh"

for fx in k8s-v2-systemd k8s-v1-cgroupfs rapl-cpufreq bare-vm; do
    [ -d "$MLWATCH_FIXTURES/$fx" ] || fail "fixture $fx is missing"
    "$MLWATCH_BIN" metrics --root "$MLWATCH_FIXTURES/$fx" --node-name "$fx" --nvml-library none --rocm-library none >"$WORK/$fx.prom" 2>"$WORK/$fx.err" ||
        fail "$fx: mlwatch metrics failed: $(cat "$WORK/$fx.err")"
    promtool check metrics <"$WORK/$fx.prom" >"$WORK/$fx.lint" 2>&1 ||
        fail "$fx: promtool check metrics: $(cat "$WORK/$fx.lint")"
    ok
    errs=$(grep '^mlwatch_collector_errors_total' "$WORK/$fx.prom" | awk '$2 != 0')
    [ -z "$errs" ] || fail "$fx: collectors reported errors on a clean fixture: $errs $(cat "$WORK/$fx.err")"
    ok
    stable_samples <"$WORK/$fx.prom" >"$WORK/$fx.stable"
    golden="$MLWATCH_SRC/tests/golden/$fx.prom"
    if [ "${UPDATE_GOLDEN:-}" = 1 ]; then
        cp "$WORK/$fx.stable" "$golden"
        echo "updated $golden"
    fi
    [ -f "$golden" ] || fail "$fx: no golden file $golden (run with UPDATE_GOLDEN=1 and review it)"
    diff -u "$golden" "$WORK/$fx.stable" >"$WORK/$fx.diff" || fail "$fx: exposition differs from $golden:
$(head -40 "$WORK/$fx.diff")"
    ok
done

# What must be absent where the hardware is absent, and present where not.
if grep -q '^mlwatch_cpu_frequency_hertz' "$WORK/bare-vm.prom"; then fail "bare-vm reports cpufreq"; fi
ok
if grep -q '^mlwatch_rapl_energy_joules_total' "$WORK/bare-vm.prom"; then fail "bare-vm reports RAPL"; fi
ok
grep -q '^mlwatch_rapl_energy_joules_total{zone="package-0",node="rapl-cpufreq"}' "$WORK/rapl-cpufreq.prom" || fail "rapl-cpufreq lacks RAPL"
ok
grep -q '^mlwatch_cpu_scaling_governor_info{cpu="0",governor="powersave",node="rapl-cpufreq"} 1$' "$WORK/rapl-cpufreq.prom" || fail "governor of cpu0"
ok
for fx in k8s-v2-systemd k8s-v1-cgroupfs; do
    grep -q '^mlwatch_container_cpu_seconds_total{namespace="' "$WORK/$fx.prom" || fail "$fx: no pod containers"
    ok
done
done_ok
