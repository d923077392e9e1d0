#!/usr/bin/env bash
# gpu_metrics.sh - `mlwatch metrics` with the fake NVML library
# (build/tests/fakenvml/libnvidia-ml.so.1) on the gpu-node fixture, for each
# scenario of tests/fakenvml/scenarios: the exposition passes the real
# `promtool check metrics`, the gpu collector reports no error, every GPU's
# container shares add up to the device figures, and the GPU samples equal
# the reviewed expectation in tests/golden/gpu-SCENARIO.prom (regenerate
# with UPDATE_GOLDEN=1 and review the diff).
source "$(dirname "$0")/lib.sh"

: "${MLWATCH_BUILD:=$MLWATCH_SRC/build}"
fake=$MLWATCH_BUILD/tests/fakenvml/libnvidia-ml.so.1
[ -f "$fake" ] || fail "fake NVML library not built: $fake"
root=$MLWATCH_FIXTURES/gpu-node

for sc in h100x8 timeshare a100-mig h100-mig consumer; do
    FAKE_NVML_SCENARIO=$MLWATCH_SRC/tests/fakenvml/scenarios/$sc.txt \
        "$MLWATCH_BIN" metrics --root "$root" --node-name gpu-node --collectors cgroup,gpu --nvml-library "$fake" \
        --rocm-library none >"$WORK/$sc.prom" 2>"$WORK/$sc.err" ||
        fail "$sc: mlwatch metrics failed: $(cat "$WORK/$sc.err")"
    promtool check metrics <"$WORK/$sc.prom" >"$WORK/$sc.lint" 2>&1 ||
        fail "$sc: promtool check metrics: $(cat "$WORK/$sc.lint")"
    ok
    expect_eq "$sc: gpu errors" 'mlwatch_collector_errors_total{collector="gpu",node="gpu-node"} 0' \
        "$(grep '^mlwatch_collector_errors_total{collector="gpu",' "$WORK/$sc.prom")"
    # One line (what was found); on a GPU in MIG mode without GPM one more
    # saying that MIG instances have no utilization.
    lines=1
    [ "$sc" = a100-mig ] && lines=2
    expect_eq "$sc: log lines of the gpu collector" $lines "$(grep -c ' gpu: ' "$WORK/$sc.err")"
    if [ "$sc" = a100-mig ]; then
        grep -q 'info gpu: GPU 0: no GPM support: MIG instances have no utilization (GPM needs a Hopper or newer GPU and driver R520 or later)' "$WORK/$sc.err" ||
            fail "a100-mig: GPM line: $(cat "$WORK/$sc.err")"
    fi
    # Shares add up: per GPU, container memory == device memory, and the
    # container utilization shares == device utilization (to 1e-9).
    awk '
        function gpu(s) { match(s, /gpu="[0-9]+"/); return substr(s, RSTART + 5, RLENGTH - 6) }
        /^mlwatch_gpu_memory_used_bytes\{/ { dev_m[gpu($0)] = $NF }
        /^mlwatch_gpu_utilization_ratio\{/ { dev_u[gpu($0)] = $NF }
        /^mlwatch_container_gpu_memory_used_bytes\{/ { sum_m[gpu($0)] += $NF }
        /^mlwatch_container_gpu_utilization_ratio\{/ { sum_u[gpu($0)] += $NF; has_u[gpu($0)] = 1 }
        END {
            for (g in dev_m) if (sum_m[g] != dev_m[g]) { print "memory of gpu " g ": " sum_m[g] " != " dev_m[g]; bad = 1 }
            for (g in has_u) { d = sum_u[g] - dev_u[g]; if (d > 1e-9 || d < -1e-9) { print "utilization of gpu " g ": " sum_u[g] " != " dev_u[g]; bad = 1 } }
            exit bad
        }' "$WORK/$sc.prom" >"$WORK/$sc.sums" || fail "$sc: shares do not add up: $(cat "$WORK/$sc.sums")"
    ok
    grep -E '^mlwatch_(gpu|mig|container_gpu|container_mig)_' "$WORK/$sc.prom" >"$WORK/$sc.gpu"
    golden=$MLWATCH_SRC/tests/golden/gpu-$sc.prom
    if [ "${UPDATE_GOLDEN:-}" = 1 ]; then
        cp "$WORK/$sc.gpu" "$golden"
        echo "updated $golden"
    fi
    [ -f "$golden" ] || fail "$sc: no golden file $golden (run with UPDATE_GOLDEN=1 and review it)"
    diff -u "$golden" "$WORK/$sc.gpu" >"$WORK/$sc.diff" ||
        fail "$sc: GPU samples differ from $golden:
$(head -40 "$WORK/$sc.diff")"
    ok
done

# OpenMetrics: the GPU counters and info family are named as the format wants.
FAKE_NVML_SCENARIO=$MLWATCH_SRC/tests/fakenvml/scenarios/h100x8.txt \
    "$MLWATCH_BIN" metrics --root "$root" --collectors gpu --nvml-library "$fake" \
    --rocm-library none --format openmetrics >"$WORK/om.txt" 2>/dev/null
grep -q '^# TYPE mlwatch_gpu_energy_joules counter$' "$WORK/om.txt" || fail "energy counter family in OpenMetrics"
ok
grep -q '^# TYPE mlwatch_gpu info$' "$WORK/om.txt" || fail "gpu info family in OpenMetrics"
ok
grep -q '^# UNIT mlwatch_gpu_energy_joules joules$' "$WORK/om.txt" || fail "energy UNIT line"
ok
expect_eq "OpenMetrics last line" "# EOF" "$(tail -n1 "$WORK/om.txt")"
done_ok
