#!/usr/bin/env bash
# device-bundle.sh - mlwatch and the shared libraries it needs, in one folder
# that runs on a machine where they are not installed and nothing can be
# fetched: the GPU machine a session may be lent (issue 3, item 8), whose
# image has the NVIDIA driver but not libmicrohttpd, GnuTLS or jansson.
#
#   scripts/device-bundle.sh [DIR]     (default: .device; MLWATCH_BIN: build/mlwatch)
#
# DIR/mlwatch is a wrapper that runs DIR/bin/mlwatch with DIR/lib first on
# the library path. DIR/lib holds every library the binary links, and those
# it loads when used that a GPU check needs (libyaml, libsnappy,
# libprotobuf-c, libisal), with what they link in turn. Not bundled: glibc
# and GCC's runtime (the host's own, newer or the same, go with its loader), the
# GPU libraries (the host's driver), and libcurl and libcrypto (remote
# write, notifications, hashmod: off unless configured; their closure is
# large). Then, on the device machine:
#
#   MLWATCH_BIN=.device/mlwatch scripts/gpu-check.sh "$OUT/gpu-check"
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-.device}
bin=${MLWATCH_BIN:-build/mlwatch}
[ -x "$bin" ] || { echo "device-bundle: no $bin (build first: make)" >&2; exit 1; }
lazy=(libyaml-0.so.2 libsnappy.so.1 libprotobuf-c.so.1 libisal.so.2)

# glibc's own libraries stay the host's: they go with its loader. So do GCC's
# runtime libraries (libsnappy links them): every system has them, and a
# newer one serves programs built against an older one, not the reverse.
is_host_lib() {
    case $1 in
    linux-vdso.so.* | ld-linux*.so.* | libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | \
        librt.so.* | libresolv.so.* | libutil.so.* | libmvec.so.* | libstdc++.so.* | libgcc_s.so.*)
        return 0
        ;;
    esac
    return 1
}

rm -rf "$dir"
mkdir -p "$dir/bin" "$dir/lib"
cp "$bin" "$dir/bin/mlwatch"
declare -A have
add() { # FILE: copy it under its soname, then what it links
    local path=$1 name
    name=$(basename "$path")
    [ -z "${have[$name]:-}" ] || return 0
    have[$name]=1
    cp -L "$path" "$dir/lib/$name"
    deps "$path"
}
deps() { # FILE: add each library ldd names, the host's excepted
    local name arrow path rest
    while read -r name arrow path rest; do
        [ "$arrow" = "=>" ] || continue
        is_host_lib "$name" && continue
        [ "$path" != "not" ] || { echo "device-bundle: $1 needs $name, not found here" >&2; exit 1; }
        add "$path"
    done < <(ldd "$1")
}
deps "$bin"
for soname in "${lazy[@]}"; do
    path=$(ldconfig -p | awk -v n="$soname" '$1 == n && /x86-64/ && !found {found = $NF} END {print found}')
    [ -n "$path" ] || { echo "device-bundle: $soname is not installed (scripts/install-deps.sh)" >&2; exit 1; }
    add "$path"
done
cat >"$dir/mlwatch" <<'SH'
#!/bin/sh
# mlwatch with the libraries beside it (scripts/device-bundle.sh).
here=$(cd "$(dirname "$0")" && pwd)
LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$here/bin/mlwatch" "$@"
SH
chmod +x "$dir/mlwatch"
echo "device-bundle: $dir: mlwatch and ${#have[@]} libraries, $(du -sh "$dir" | cut -f1)"
