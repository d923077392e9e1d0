#!/usr/bin/env bash
# remote_write_reject.sh - retry rules against a small local receiver that
# answers like a real one would: /reject answers 400 to everything (the
# batch must be dropped, counted, logged, never sent again); /flaky answers
# 503 with Retry-After: 1 to the first two requests, then 204 (the same
# batch must be retried until it is accepted). The receiver also checks the
# request headers the protocol requires and the credentials (from files).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/rw_lib.sh"

port=$(free_port)
cat >"$WORK/server.py" <<'PY'
import hashlib, http.server, json, sys
log = open(sys.argv[2], 'a')
state = {'flaky': 0}
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers['Content-Length']))
        ok = (self.headers['Content-Encoding'] == 'snappy' and
              self.headers['Content-Type'] == 'application/x-protobuf' and
              self.headers['X-Prometheus-Remote-Write-Version'] == '0.1.0' and
              self.headers['User-Agent'].startswith('mlwatch/') and
              self.headers.get('Authorization') == {'/reject': 'Basic dTpwdw==',
                                                    '/flaky': 'Bearer s3cret-token'}[self.path])
        if self.path == '/reject':
            code = 400
        else:
            state['flaky'] += 1
            code = 503 if state['flaky'] <= 2 else 204
        log.write(json.dumps({'path': self.path, 'code': code, 'headers_ok': ok,
                              'body': hashlib.sha1(body).hexdigest()}) + '\n')
        log.flush()
        self.send_response(code)
        if code == 503:
            self.send_header('Retry-After', '1')
        msg = b'out of order sample\n' if code == 400 else b''
        self.send_header('Content-Length', str(len(msg)))
        self.end_headers()
        self.wfile.write(msg)
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(('127.0.0.1', int(sys.argv[1])), H).serve_forever()
PY
python3 "$WORK/server.py" "$port" "$WORK/requests.log" &
PIDS+=($!)
for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done

printf 's3cret-token\n' >"$WORK/token"
printf 'pw' >"$WORK/password"
cat >"$WORK/mlwatch.yml" <<YAML
remote_write:
  - {url: 'http://127.0.0.1:$port/reject', name: reject,
     basic_auth: {username: u, password_file: '$WORK/password'},
     queue_config: {batch_send_deadline: 300ms, max_shards: 1, min_backoff: 10ms}}
  - {url: 'http://127.0.0.1:$port/flaky', name: flaky, bearer_token_file: '$WORK/token',
     queue_config: {batch_send_deadline: 300ms, max_shards: 1}}
YAML
root=$(fixture_copy rapl-cpufreq)
start_agent --root "$root" --interval 200ms --data-dir "$WORK/data" --config "$WORK/mlwatch.yml"
sleep 4
wait_drained 20

python3 - "$WORK/requests.log" <<'PY' || fail "requests not as expected"
import collections, json, sys
reqs = [json.loads(l) for l in open(sys.argv[1])]
assert all(r['headers_ok'] for r in reqs), 'missing or wrong protocol headers'
rej = [r for r in reqs if r['path'] == '/reject']
bodies = collections.Counter(r['body'] for r in rej)
assert len(rej) >= 3, 'only %d batches sent to /reject' % len(rej)
assert max(bodies.values()) == 1, 'a rejected batch was sent again: %s' % bodies.most_common(1)
flaky = [r for r in reqs if r['path'] == '/flaky']
assert [r['code'] for r in flaky[:3]] == [503, 503, 204], flaky[:3]
assert flaky[0]['body'] == flaky[1]['body'] == flaky[2]['body'], 'retry sent another batch'
print('reject: %d batches, each once; flaky: %d requests' % (len(rej), len(flaky)))
PY
ok
[ "$(agent_metric mlwatch_remote_write_samples_failed_total 'endpoint="reject"')" -gt 0 ] || fail "rejected samples not counted"
expect_eq "samples retried for /reject" 0 "$(agent_metric mlwatch_remote_write_samples_retried_total 'endpoint="reject"')"
expect_eq "samples sent to /reject" 0 "$(agent_metric mlwatch_remote_write_samples_sent_total 'endpoint="reject"')"
[ "$(agent_metric mlwatch_remote_write_samples_retried_total 'endpoint="flaky"')" -gt 0 ] || fail "retries not counted"
expect_eq "samples failed for /flaky" 0 "$(agent_metric mlwatch_remote_write_samples_failed_total 'endpoint="flaky"')"
grep -q 'reject: batch of [0-9]* samples refused, dropped (not retried): HTTP 400: out of order sample' "$WORK/agent.log" ||
    fail "no log line for the refused batch: $(grep remote-write "$WORK/agent.log")"
ok
# Secrets never show in the log or the metrics.
curl -s "$AGENT_URL/metrics" >"$WORK/metrics.txt"
! grep -q 's3cret' "$WORK/agent.log" "$WORK/metrics.txt" || fail "the token leaked"
ok
done_ok
