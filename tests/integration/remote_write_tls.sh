#!/usr/bin/env bash
# remote_write_tls.sh - remote write over HTTPS against a local receiver
# whose certificate (SAN IP:127.0.0.1) is signed by a throwaway CA made here
# with openssl. Four endpoints on the same server: `ca` trusts that CA (its
# batches must arrive, with the protocol headers and the bearer token), `other`
# trusts an unrelated CA and `nothing` has no tls_config (the system's trust
# store): both must fail certificate verification, keep their samples queued
# (counted as retried, never as sent) and log the TLS problem, without the
# token; `insecure` has insecure_skip_verify and no CA, and must get through.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/rw_lib.sh"

# MLWATCH_LIBCURL=gnutls (remote_write_tls_gnutls.sh): the agent finds
# libcurl-gnutls as its libcurl.so.4, so that GnuTLS, which the agent does
# not start before main() (src/serve/http.c), is started by libcurl.
if [ "${MLWATCH_LIBCURL:-}" = gnutls ]; then
    # awk reads to the end: exiting at the match would end ldconfig's output
    # early with SIGPIPE, which pipefail and set -e turn into a silent exit.
    gnutls_curl=$(ldconfig -p | awk '$1 == "libcurl-gnutls.so.4" && /x86-64|AArch64/ && !found {found = $NF} END {print found}')
    [ -n "$gnutls_curl" ] || fail "libcurl-gnutls.so.4 is not installed (apt-get install libcurl3-gnutls)"
    mkdir -p "$WORK/libcurl"
    ln -s "$gnutls_curl" "$WORK/libcurl/libcurl.so.4"
    printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$WORK/libcurl" "$MLWATCH_BIN" >"$WORK/mlwatch"
    chmod +x "$WORK/mlwatch"
    MLWATCH_BIN=$WORK/mlwatch
    tls_problem='server certificate verification failed\. CAfile: [^ ]+ CRLfile: none'
else
    tls_problem='SSL certificate problem: (unable to get local issuer certificate|self.signed certificate in certificate chain)'
fi

# The CAs and the server certificate (EC keys: fast to make).
ec='-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes'
for ca in ca other-ca; do
    # shellcheck disable=SC2086
    openssl req -x509 $ec -keyout "$WORK/$ca.key" -out "$WORK/$ca.pem" -days 1 \
        -subj "/CN=mlwatch test $ca" 2>>"$WORK/openssl.log" || fail "openssl: cannot make $ca"
done
# shellcheck disable=SC2086
openssl req -new $ec -keyout "$WORK/server.key" -out "$WORK/server.csr" -subj /CN=127.0.0.1 \
    2>>"$WORK/openssl.log" || fail "openssl: cannot make the server key"
printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' \
    >"$WORK/server.ext"
openssl x509 -req -in "$WORK/server.csr" -CA "$WORK/ca.pem" -CAkey "$WORK/ca.key" \
    -CAcreateserial -days 1 -extfile "$WORK/server.ext" -out "$WORK/server.pem" \
    2>>"$WORK/openssl.log" || fail "openssl: cannot sign the server certificate"

port=$(free_port)
cat >"$WORK/server.py" <<'PY'
import hashlib, http.server, json, ssl, sys
port, cert, key, logpath = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
log = open(logpath, 'a')
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers['Content-Length']))
        log.write(json.dumps({'path': self.path,
                              'encoding': self.headers['Content-Encoding'],
                              'type': self.headers['Content-Type'],
                              'version': self.headers['X-Prometheus-Remote-Write-Version'],
                              'auth': self.headers.get('Authorization'),
                              'len': len(body),
                              'body': hashlib.sha1(body).hexdigest()}) + '\n')
        log.flush()
        self.send_response(204)
        self.send_header('Content-Length', '0')
        self.end_headers()
    def do_GET(self):  # readiness probe of the test
        self.send_response(200)
        self.send_header('Content-Length', '0')
        self.end_headers()
    def log_message(self, *a):
        pass
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
srv = http.server.ThreadingHTTPServer(('127.0.0.1', port), H)
# The handshake runs in accept(); a client that refuses the certificate makes
# it raise ssl.SSLError (an OSError), which socketserver drops quietly.
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
srv.serve_forever()
PY
python3 "$WORK/server.py" "$port" "$WORK/server.pem" "$WORK/server.key" "$WORK/requests.log" \
    2>"$WORK/server.log" &
PIDS+=($!)
for _ in $(seq 50); do
    curl -s -o /dev/null --cacert "$WORK/ca.pem" "https://127.0.0.1:$port/" && break
    sleep 0.1
done
curl -sf -o /dev/null --cacert "$WORK/ca.pem" "https://127.0.0.1:$port/" ||
    fail "the HTTPS receiver does not answer with a certificate the CA verifies"
ok

printf 's3cret-tls-token\n' >"$WORK/token"
qc='queue_config: {batch_send_deadline: 200ms, max_shards: 1, min_backoff: 10ms, max_backoff: 200ms}'
cat >"$WORK/mlwatch.yml" <<YAML
remote_write:
  - {url: 'https://127.0.0.1:$port/ca', name: ca, bearer_token_file: '$WORK/token',
     tls_config: {ca_file: '$WORK/ca.pem'}, $qc}
  - {url: 'https://127.0.0.1:$port/other', name: other, bearer_token_file: '$WORK/token',
     tls_config: {ca_file: '$WORK/other-ca.pem'}, $qc}
  - {url: 'https://127.0.0.1:$port/nothing', name: nothing, bearer_token_file: '$WORK/token', $qc}
  - {url: 'https://127.0.0.1:$port/insecure', name: insecure,
     tls_config: {insecure_skip_verify: true}, $qc}
YAML
root=$(fixture_copy rapl-cpufreq)
start_agent --root "$root" --interval 200ms --data-dir "$WORK/data" --config "$WORK/mlwatch.yml"

# Wait until both trusted endpoints have delivered at least two batches.
sent_ca=0
for _ in $(seq 50); do
    sent_ca=$(agent_metric mlwatch_remote_write_samples_sent_total 'endpoint="ca"')
    n=$(grep -c '"/ca"' "$WORK/requests.log" 2>/dev/null || true)
    m=$(grep -c '"/insecure"' "$WORK/requests.log" 2>/dev/null || true)
    [ "${n:-0}" -ge 2 ] && [ "${m:-0}" -ge 2 ] && [ "$sent_ca" -gt 0 ] && break
    sleep 0.2
done
[ "$sent_ca" -gt 0 ] || fail "nothing counted as sent to the endpoint with the CA"
ok

python3 - "$WORK/requests.log" <<'PY' || fail "requests not as expected"
import collections, json, sys
reqs = [json.loads(l) for l in open(sys.argv[1])]
paths = collections.Counter(r['path'] for r in reqs)
assert paths['/ca'] >= 2, 'only %d batches over TLS with the CA' % paths['/ca']
assert paths['/insecure'] >= 2, 'only %d batches with insecure_skip_verify' % paths['/insecure']
assert paths['/other'] == 0 and paths['/nothing'] == 0, 'unverified peer got data: %s' % paths
for r in reqs:
    assert r['encoding'] == 'snappy', r
    assert r['type'] == 'application/x-protobuf', r
    assert r['version'] == '0.1.0', r
    assert r['len'] > 0, r
    want = 'Bearer s3cret-tls-token' if r['path'] == '/ca' else None
    assert r['auth'] == want, 'Authorization on %s: %r' % (r['path'], r['auth'])
print('ca: %d batches, insecure: %d batches' % (paths['/ca'], paths['/insecure']))
PY
ok

# The counter grows while the agent keeps sending.
sleep 0.6
for _ in $(seq 25); do
    later=$(agent_metric mlwatch_remote_write_samples_sent_total 'endpoint="ca"')
    [ "$later" -gt "$sent_ca" ] && break
    sleep 0.2
done
[ "$later" -gt "$sent_ca" ] || fail "samples_sent_total{endpoint=ca} stuck at $sent_ca"
ok
[ "$(agent_metric mlwatch_remote_write_samples_sent_total 'endpoint="insecure"')" -gt 0 ] ||
    fail "nothing counted as sent with insecure_skip_verify"
ok
expect_eq "samples retried for ca" 0 \
    "$(agent_metric mlwatch_remote_write_samples_retried_total 'endpoint="ca"')"
expect_eq "samples failed for ca" 0 \
    "$(agent_metric mlwatch_remote_write_samples_failed_total 'endpoint="ca"')"

# Unverifiable peers: nothing sent, nothing dropped, the samples retried.
for ep in other nothing; do
    expect_eq "samples sent to $ep" 0 \
        "$(agent_metric mlwatch_remote_write_samples_sent_total "endpoint=\"$ep\"")"
    expect_eq "samples dropped for $ep" 0 \
        "$(agent_metric mlwatch_remote_write_samples_failed_total "endpoint=\"$ep\"")"
    [ "$(agent_metric mlwatch_remote_write_samples_retried_total "endpoint=\"$ep\"")" -gt 0 ] ||
        fail "TLS failures of $ep not counted as retried"
    ok
    [ "$(agent_metric mlwatch_remote_write_samples_pending "endpoint=\"$ep\"")" -gt 0 ] ||
        fail "the samples of $ep are not kept queued"
    ok
    grep -Eq "remote-write.*$ep: shard 0: $tls_problem; retrying with backoff" \
        "$WORK/agent.log" || fail "no log line naming the TLS problem of $ep: $(grep remote-write "$WORK/agent.log")"
    ok
done

# Secrets never show in the log or the metrics.
curl -s "$AGENT_URL/metrics" >"$WORK/metrics.txt"
! grep -q 's3cret' "$WORK/agent.log" "$WORK/metrics.txt" || fail "the token leaked"
ok
done_ok
