#!/usr/bin/env bash
# make-secrets.sh - the Secrets deploy/kubernetes/mlwatch.yaml mounts, made
# with openssl (docs/deploy.md, "Tokens and TLS"; cert-manager can make the
# TLS one instead):
#   mlwatch-tls     tls.crt, tls.key: the agents' serving certificate, for
#                   the DNS name "mlwatch" (scrapers reach agents at node
#                   addresses and verify the name with serverName: mlwatch,
#                   as the ServiceMonitor does) and mlwatch.NAMESPACE.svc;
#                   ca.crt: its CA
#   mlwatch-hub-tls tls.crt, tls.key: the hub's serving certificate, signed
#                   by the same CA, for the hub Service's names
#                   (mlwatch-hub, mlwatch-hub.NAMESPACE.svc[.cluster.local]);
#                   a key of its own, so that no node's key passes for the hub
#   mlwatch-tokens  metrics, read: bearer tokens (32 random bytes each) for
#                   the agents' --metrics-token-file and --read-token-file;
#                   write: for a hub's --write-token-file and the agents'
#                   remote-write bearer_token_file
#
#   scripts/make-secrets.sh DIR [NAMESPACE]   write the files into DIR (0700)
#                                             and print the kubectl commands
#   ... --apply                               and run them
# NAMESPACE defaults to mlwatch. Files that exist in DIR are kept, so that
# running it again re-creates the Secrets with the same values; delete a
# file to rotate it (the agents re-read tokens and certificates in place).
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 DIR [NAMESPACE] [--apply]" >&2; exit 2; }
dir=$1
ns=mlwatch
apply=0
for a in "${@:2}"; do
    case $a in
    --apply) apply=1 ;;
    -*) echo "$0: unknown option $a" >&2; exit 2 ;;
    *) ns=$a ;;
    esac
done
command -v openssl >/dev/null || { echo "$0: openssl is needed" >&2; exit 1; }
umask 077
mkdir -p "$dir"
ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
if [ ! -s "$dir/ca.crt" ] || [ ! -s "$dir/ca.key" ]; then
    openssl req -x509 "${ec[@]}" -keyout "$dir/ca.key" -out "$dir/ca.crt" -days 3650 \
        -subj "/CN=mlwatch CA ($ns)" -addext basicConstraints=critical,CA:TRUE \
        -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
fi
if [ ! -s "$dir/tls.crt" ] || [ ! -s "$dir/tls.key" ]; then
    openssl req -new "${ec[@]}" -keyout "$dir/tls.key" -out "$dir/tls.csr" \
        -subj "/CN=mlwatch" 2>/dev/null
    printf 'subjectAltName=DNS:mlwatch,DNS:mlwatch.%s.svc,DNS:*.mlwatch.%s.svc\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' \
        "$ns" "$ns" >"$dir/tls.ext"
    openssl x509 -req -in "$dir/tls.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial \
        -days 397 -extfile "$dir/tls.ext" -out "$dir/tls.crt" 2>/dev/null
    rm -f "$dir/tls.csr" "$dir/tls.ext"
fi
if [ ! -s "$dir/hub.crt" ] || [ ! -s "$dir/hub.key" ]; then
    openssl req -new "${ec[@]}" -keyout "$dir/hub.key" -out "$dir/hub.csr" \
        -subj "/CN=mlwatch-hub" 2>/dev/null
    printf 'subjectAltName=DNS:mlwatch-hub,DNS:mlwatch-hub.%s.svc,DNS:mlwatch-hub.%s.svc.cluster.local\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' \
        "$ns" "$ns" >"$dir/hub.ext"
    openssl x509 -req -in "$dir/hub.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial \
        -days 397 -extfile "$dir/hub.ext" -out "$dir/hub.crt" 2>/dev/null
    rm -f "$dir/hub.csr" "$dir/hub.ext"
fi
for t in metrics read write; do
    # RFC 6750 b64token characters only (base64url without padding).
    [ -s "$dir/$t" ] || openssl rand -base64 32 | tr '+/' '-_' | tr -d '=\n' >"$dir/$t"
done
cmds=(
    "kubectl -n $ns create secret generic mlwatch-tls --from-file=tls.crt=$dir/tls.crt --from-file=tls.key=$dir/tls.key --from-file=ca.crt=$dir/ca.crt --dry-run=client -o yaml | kubectl apply -f -"
    "kubectl -n $ns create secret generic mlwatch-hub-tls --from-file=tls.crt=$dir/hub.crt --from-file=tls.key=$dir/hub.key --dry-run=client -o yaml | kubectl apply -f -"
    "kubectl -n $ns create secret generic mlwatch-tokens --from-file=metrics=$dir/metrics --from-file=read=$dir/read --from-file=write=$dir/write --dry-run=client -o yaml | kubectl apply -f -"
)
for c in "${cmds[@]}"; do
    echo "$c"
    [ $apply = 1 ] && bash -c "$c"
done
exit 0
