#!/usr/bin/env bash
# cli.sh - command line: help, version, and usage errors (one line, exit 2).
source "$(dirname "$0")/lib.sh"

# expect_usage_error EXPECTED_LINE ARGS...
expect_usage_error() {
    local want=$1
    shift
    set +e
    "$MLWATCH_BIN" "$@" >"$WORK/out" 2>"$WORK/err"
    local rc=$?
    set -e
    expect_eq "exit status of '$*'" 2 "$rc"
    expect_eq "stderr lines of '$*'" 1 "$(wc -l <"$WORK/err")"
    expect_eq "message of '$*'" "$want" "$(cat "$WORK/err")"
    expect_eq "stdout of '$*'" "" "$(cat "$WORK/out")"
}

"$MLWATCH_BIN" --version | grep -Eq '^mlwatch [0-9]+\.[0-9]+\.[0-9]+ \(revision [0-9a-f]+|unknown\)$' ||
    fail "--version output: $("$MLWATCH_BIN" --version)"
ok
# GnuTLS, loaded with libmicrohttpd, is not started (src/serve/http.c): with
# its debug log on, starting it would print "gnutls[2]: Enabled GnuTLS ...".
expect_eq "GnuTLS log lines of a plain run" "mlwatch" \
    "$(GNUTLS_DEBUG_LEVEL=2 "$MLWATCH_BIN" --version 2>&1 | cut -d' ' -f1 | sort -u)"
"$MLWATCH_BIN" help >"$WORK/help"
for word in "mlwatch agent" "mlwatch metrics" "--root" "--listen" "--interval" "--config" ":10230" "loadavg"; do
    grep -q -- "$word" "$WORK/help" || fail "help does not mention $word"
    ok
done

# `mlwatch CMD --help` (or -h): the command's usage and its flags, exit 0,
# for every command `mlwatch help` lists (a new one is checked too).
cmds=$("$MLWATCH_BIN" help | sed -n 's/^  mlwatch \([a-z][a-z]*\) .*/\1/p' | grep -vx help | sort -u | tr '\n' ' ')
expect_eq "the commands" "agent doctor hub metrics query rules run store " "$cmds"
for cmd in $cmds; do
    for flag in --help -h; do
        "$MLWATCH_BIN" "$cmd" "$flag" >"$WORK/cmdhelp" 2>"$WORK/cmdhelp.err" ||
            fail "mlwatch $cmd $flag: exit status $?"
        expect_eq "mlwatch $cmd $flag: first line" "Usage:" "$(head -1 "$WORK/cmdhelp")"
        expect_eq "mlwatch $cmd $flag: usage" "  mlwatch $cmd" "$(sed -n 2p "$WORK/cmdhelp" | cut -c1-$((10 + ${#cmd})))"
        expect_eq "mlwatch $cmd $flag: stderr" "" "$(cat "$WORK/cmdhelp.err")"
        grep -q -- "^  --root PATH " "$WORK/cmdhelp" || fail "mlwatch $cmd $flag: no --root"
        ok
    done
done
# Each command's own flags, and none of another command's.
"$MLWATCH_BIN" doctor --help >"$WORK/cmdhelp"
grep -q -- "^  --pod VALUE .*\`mlwatch doctor\`: only findings of this pod" "$WORK/cmdhelp" || fail "doctor --help: no --pod"
grep -q -- "^  --url VALUE " "$WORK/cmdhelp" || fail "doctor --help: no --url"
! grep -q -- "^  --work " "$WORK/cmdhelp" || fail "doctor --help lists run's --work"
ok
"$MLWATCH_BIN" run --help >"$WORK/cmdhelp"
grep -q -- "^  --work NUMBER " "$WORK/cmdhelp" || fail "run --help: no --work"
grep -q -- "^  --json " "$WORK/cmdhelp" || fail "run --help: no --json"
! grep -q -- "^  --pod " "$WORK/cmdhelp" || fail "run --help lists doctor's --pod"
ok
"$MLWATCH_BIN" agent --help >"$WORK/cmdhelp"
grep -q -- "^  --listen VALUE " "$WORK/cmdhelp" || fail "agent --help: no --listen"
! grep -q -- "^  --time " "$WORK/cmdhelp" || fail "agent --help lists query's --time"
ok
# After "--", --help is the command's own (mlwatch run -- tool --help).
expect_usage_error "mlwatch doctor: unknown flag '--bogus' (see \`mlwatch help\`)" doctor --bogus

expect_usage_error "mlwatch: unknown command 'frobnicate' (see \`mlwatch help\`)" frobnicate
expect_usage_error "mlwatch agent: unknown flag '--bogus' (see \`mlwatch help\`)" agent --bogus
expect_usage_error "mlwatch agent: --interval: invalid duration 'soon' (examples: 1s, 500ms, 1m30s)" agent --interval soon
expect_usage_error "mlwatch agent: --interval: invalid duration '0s' (examples: 1s, 500ms, 1m30s)" agent --interval=0s
expect_usage_error "mlwatch agent: --query-max-samples: must be a whole number from 0 to 1e15, got '-3'" agent --query-max-samples -3
expect_usage_error "mlwatch agent: --query-lookback-delta: invalid duration 'soon' (examples: 1s, 500ms, 1m30s)" agent --query-lookback-delta soon
expect_usage_error "mlwatch metrics: --listen: must be ADDR:PORT with a port from 0 to 65535, like :10230 or 127.0.0.1:10230" metrics --listen 127.0.0.1:99999
expect_usage_error "mlwatch metrics: --collectors: no collector named 'gpu9' (see \`mlwatch help\`)" metrics --collectors loadavg,gpu9
expect_usage_error "mlwatch metrics: --root: missing value" metrics --root
expect_usage_error "mlwatch metrics: unexpected argument 'extra'" metrics extra

printf 'root: /\ninterval: 2s\nintervall: 1s\n' >"$WORK/unknown.yaml"
expect_usage_error "mlwatch agent: $WORK/unknown.yaml:3:1: unknown key 'intervall'" agent --config "$WORK/unknown.yaml"
printf 'interval: [1s, 2s]\n' >"$WORK/type.yaml"
expect_usage_error "mlwatch agent: $WORK/type.yaml:1:11: interval: expected a single value, got a list" agent --config "$WORK/type.yaml"
printf 'listen: "localhost"\n' >"$WORK/listen.yaml"
expect_usage_error "mlwatch agent: $WORK/listen.yaml:1:9: listen: must be ADDR:PORT with a port from 0 to 65535, like :10230 or 127.0.0.1:10230" agent --config "$WORK/listen.yaml"
printf 'external_labels: {node: "${MLWATCH_UNSET_FOR_TEST}"}\n' >"$WORK/extenv.yaml"
expect_usage_error "mlwatch agent: $WORK/extenv.yaml:1:18: external_labels: node: environment variable MLWATCH_UNSET_FOR_TEST is not set" agent --config "$WORK/extenv.yaml"
printf 'remote_write: [{url: "http://127.0.0.1:1/w", external_labels: {x: "${X"}}]\n' >"$WORK/extbad.yaml"
expect_usage_error "mlwatch agent: $WORK/extbad.yaml:1:16: remote_write[0].external_labels: x: unterminated \${ in '\${X'" agent --config "$WORK/extbad.yaml"
printf 'interval: 1s\n  bad indent: [\n' >"$WORK/syntax.yaml"
set +e
"$MLWATCH_BIN" agent --config "$WORK/syntax.yaml" 2>"$WORK/err"
rc=$?
set -e
expect_eq "exit status for a YAML syntax error" 2 "$rc"
grep -Eq "^mlwatch agent: $WORK/syntax.yaml:[0-9]+:[0-9]+: YAML syntax error: " "$WORK/err" || fail "syntax error message: $(cat "$WORK/err")"
ok
expect_usage_error "mlwatch agent: $WORK/missing.yaml: cannot open config file: No such file or directory" agent --config "$WORK/missing.yaml"

# A config file sets values; a flag overrides the file.
printf 'collectors: [loadavg]\nformat: openmetrics\n' >"$WORK/good.yaml"
env -u NODE_NAME "$MLWATCH_BIN" metrics --config "$WORK/good.yaml" --root "$MLWATCH_FIXTURES/bare-vm" >"$WORK/om"
expect_eq "last line of OpenMetrics output" "# EOF" "$(tail -n1 "$WORK/om")"
grep -q '^mlwatch_load1{node="'"$(hostname)"'"} ' "$WORK/om" || fail "loadavg missing from config-selected run"
ok
# The node label: the host name by default, else $NODE_NAME, else --node-name.
expect_eq "node label from \$NODE_NAME" 'mlwatch_load1{node="n-env"} 0.1' \
    "$(NODE_NAME=n-env "$MLWATCH_BIN" metrics --collectors loadavg --root "$MLWATCH_FIXTURES/bare-vm" | grep '^mlwatch_load1{')"
expect_eq "node label from --node-name" 'mlwatch_load1{node="n-flag"} 0.1' \
    "$(NODE_NAME=n-env "$MLWATCH_BIN" metrics --collectors loadavg --node-name n-flag --root "$MLWATCH_FIXTURES/bare-vm" | grep '^mlwatch_load1{')"
if grep -q '^mlwatch_cpu_seconds_total' "$WORK/om"; then fail "collectors: [loadavg] did not restrict collectors"; fi
ok
"$MLWATCH_BIN" metrics --config "$WORK/good.yaml" --format text --root "$MLWATCH_FIXTURES/bare-vm" >"$WORK/text"
if grep -q '^# EOF' "$WORK/text"; then fail "--format text did not override the file"; fi
ok
# docs/configuration.md carries the table `mlwatch help --markdown` prints.
"$MLWATCH_BIN" help --markdown >"$WORK/options.md"
sed -n '/^| flag | YAML key | default | meaning |$/,$p' "$MLWATCH_SRC/docs/configuration.md" >"$WORK/doc-options.md"
diff -u "$WORK/doc-options.md" "$WORK/options.md" >"$WORK/options.diff" ||
    fail "docs/configuration.md's settings table is stale; regenerate it with \`mlwatch help --markdown\`:
$(head -20 "$WORK/options.diff")"
ok
done_ok
