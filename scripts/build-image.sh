#!/usr/bin/env bash
# build-image.sh - the mlwatch container image (OCI), from this repository,
# with Debian's tools and packages only (no Docker Hub, no Dockerfile).
#
#   scripts/build-image.sh [--binary PATH] [--out DIR] [--refresh]
#   scripts/build-image.sh --print-ref   the reference it builds, and exits
#
# Build stage: this machine, which must be Debian 12 with the build
# dependencies (scripts/install-deps.sh build): mlwatch is compiled in
# build/image/cmake (target mlwatch only) unless --binary names one built
# from this tree, and stripped.
# Run stage: one layer holding only
#   - the Debian 12 packages of the shared libraries mlwatch links
#     (libmicrohttpd and GnuTLS, jansson, RE2, zlib, libstdc++) and dlopens
#     (src/core/lazylib.c: libcurl with OpenSSL, snappy, protobuf-c,
#     libcrypto, ISA-L, libyaml), with their dependencies, extracted by
#     mmdebstrap --variant=extract and recorded in /var/lib/dpkg/status so
#     that image scanners see each package and version (a security update
#     is a rebuild); their documentation, manual pages, translations and
#     glibc's iconv modules (unused) are left out, their copyright files kept;
#   - the CA certificates of Debian's ca-certificates package, as the one
#     bundle libcurl reads (/etc/ssl/certs/ca-certificates.crt);
#   - /usr/bin/mlwatch (the web UI is embedded in it), /etc/passwd and
#     /etc/group naming root and nonroot (65532), /etc/nsswitch.conf,
#     /var/lib/mlwatch and /tmp (mode 1777, for any uid).
# No shell, no package manager, no compiler. User 65532 by default;
# entrypoint mlwatch, command `agent`.
#
# Outputs, under --out (default build/image):
#   mlwatch-VERSION.oci.tar   OCI archive; its reference (index.json's
#                             org.opencontainers.image.ref.name) is
#                             ghcr.io/mlwatch/mlwatch:VERSION, the image
#                             the manifests name (deploy/kubernetes)
#   oci/                      the same image as an OCI layout, tag VERSION
#   ref, digest               the reference and the manifest's digest
#   packages.txt              the Debian packages in the image, with versions
#   size.txt                  compressed size (layer + config + manifest)
# VERSION is MLWATCH_VERSION of src/mlwatch.h, the one place it is written
# (mlwatch --version, the tag and the manifests all read it).
#
# The extracted packages are cached in OUT/cache, keyed by the package list,
# the mirror and this script; --refresh downloads them again (do it for
# security updates).
# Timestamps are SOURCE_DATE_EPOCH (default: the last commit's time), so a
# rebuild from the same commit and the same packages gives the same digest.
# docs/deploy.md: pushing the image, pinning it by digest, kind and k3s.
set -euo pipefail

SRC=$(cd "$(dirname "$0")/.." && pwd)
OUT=$SRC/build/image
BINARY=
REFRESH=0
PRINT_REF=0
while [ $# -gt 0 ]; do
    case $1 in
    --binary) BINARY=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --refresh) REFRESH=1; shift ;;
    --print-ref) PRINT_REF=1; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "build-image: unknown argument $1 (--help)" >&2; exit 2 ;;
    esac
done

die() { echo "build-image: $*" >&2; exit 1; }
# The image's name, here only: scripts/gen_manifest.py asks --print-ref.
REPO=ghcr.io/mlwatch/mlwatch
MW_VERSION=$(sed -n 's/^#define MLWATCH_VERSION "\(.*\)"$/\1/p' "$SRC/src/mlwatch.h")
[ -n "$MW_VERSION" ] || die "no MLWATCH_VERSION in src/mlwatch.h"
REF=$REPO:$MW_VERSION
if [ "$PRINT_REF" = 1 ]; then
    echo "$REF"
    exit 0
fi
for tool in mmdebstrap umoci skopeo tar strip sha256sum; do
    command -v $tool >/dev/null || die "$tool is missing (scripts/install-deps.sh test installs mmdebstrap, umoci, skopeo)"
done
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=bookworm
ARCH=$(dpkg --print-architecture)
# What mlwatch links (ldd build/mlwatch) and dlopens (src/core/lazylib.c);
# apt adds their dependencies. Not included: FreeIPMI (needs /dev/ipmi0,
# which the DaemonSet does not give), NVML/ROCm (the GPU runtime mounts the
# driver's library into the container).
PACKAGES=(libc6 libmicrohttpd12 libjansson4 zlib1g libre2-9 libstdc++6
          libcurl4 libssl3 libsnappy1v5 libprotobuf-c1 libisal2 libyaml-0-2)
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
    SOURCE_DATE_EPOCH=$(git -C "$SRC" log -1 --format=%ct 2>/dev/null || echo 0)
fi
export SOURCE_DATE_EPOCH

# shellcheck disable=SC1091 # the build machine's
os=$(. /etc/os-release && echo "${ID:-}-${VERSION_ID:-}")
[ "$os" = debian-12 ] ||
    die "the build stage is Debian 12 (this is $os): the binary must link the libraries of the run stage"
mkdir -p "$OUT/cache"
started=$(date +%s)

# --- build stage -----------------------------------------------------------
if [ -z "$BINARY" ]; then
    # No path of this machine in the binary (its build ID hashes the debug
    # information, which names the source and build folders).
    map="-ffile-prefix-map=$SRC/= -ffile-prefix-map=$OUT/cmake=build"
    cmake -S "$SRC" -B "$OUT/cmake" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DCMAKE_C_FLAGS="$map" -DCMAKE_CXX_FLAGS="$map" >/dev/null
    cmake --build "$OUT/cmake" --target mlwatch -j "$(nproc)" >"$OUT/cmake.log" 2>&1 ||
        { tail -30 "$OUT/cmake.log" >&2; die "building mlwatch failed ($OUT/cmake.log)"; }
    BINARY=$OUT/cmake/mlwatch
fi
[ -x "$BINARY" ] || die "$BINARY: no such program"
have=$("$BINARY" --version) || die "$BINARY --version failed"
case $have in "mlwatch $MW_VERSION "*) ;; *) die "$BINARY is '$have', the source says $MW_VERSION" ;; esac

# --- run stage: the packages (cached) ---------------------------------------
# Keyed by what makes it, this script included.
key=$( (printf '%s\n' "$SUITE" "$MIRROR" "$ARCH" "${PACKAGES[@]}" && cat "$0") | sha256sum | cut -c1-16)
cache=$OUT/cache/packages-$key.tar
if [ "$REFRESH" = 1 ] || [ ! -s "$cache" ]; then
    tmp=$(mktemp -d "$OUT/cache/extract.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
    mode=root
    [ "$(id -u)" -eq 0 ] || mode=unshare
    # extract: the packages and their dependencies, unpacked, no maintainer
    # script run (none is needed for libraries, and none could run without
    # a shell). The .debs are kept to write the package database below.
    mmdebstrap --quiet --mode=$mode --variant=extract --architectures="$ARCH" \
        --include="$(
            IFS=,
            echo "${PACKAGES[*]}"
        )" \
        --skip=cleanup/apt/cache --skip=cleanup/apt/lists --skip=output/dev \
        "$SUITE" "$tmp/root" "$MIRROR" >"$OUT/mmdebstrap.log" 2>&1 ||
        { tail -30 "$OUT/mmdebstrap.log" >&2; die "mmdebstrap failed ($OUT/mmdebstrap.log)"; }
    archives=$tmp/root/var/cache/apt/archives
    # CA certificates: the package's certificates as one bundle, what its
    # update-ca-certificates would write (the package itself needs openssl,
    # debconf and perl to configure).
    (cd "$archives" && apt-get -o Dir="$tmp/root" -o Dir::State::status="$tmp/root/var/lib/dpkg/status" \
        -o Debug::NoLocking=1 download ca-certificates) >>"$OUT/mmdebstrap.log" 2>&1 ||
        { tail -5 "$OUT/mmdebstrap.log" >&2; die "cannot download ca-certificates"; }
    ls "$archives"/ca-certificates_*.deb >/dev/null 2>&1 || die "no ca-certificates package was downloaded"
    mkdir -p "$tmp/ca"
    dpkg-deb -x "$archives"/ca-certificates_*.deb "$tmp/ca"
    mkdir -p "$tmp/root/etc/ssl/certs" "$tmp/root/usr/share/doc/ca-certificates"
    find "$tmp/ca/usr/share/ca-certificates" -name '*.crt' | LC_ALL=C sort | xargs cat \
        >"$tmp/root/etc/ssl/certs/ca-certificates.crt"
    cp "$tmp/ca/usr/share/doc/ca-certificates/copyright" "$tmp/root/usr/share/doc/ca-certificates/"
    # The package database: each package's control record, as dpkg writes
    # it for an installed package.
    mkdir -p "$tmp/root/var/lib/dpkg"
    find "$archives" -maxdepth 1 -name '*.deb' | LC_ALL=C sort | while read -r deb; do
        dpkg-deb -f "$deb" | sed '/^Package:/a Status: install ok installed'
        echo
    done >"$tmp/root/var/lib/dpkg/status"
    # What the agent never reads: documentation (copyright files stay),
    # manual pages, translations, lintian overrides, gdb scripts, glibc's
    # iconv modules; and the download machinery.
    r=${tmp:?}/root
    find "$r/usr/share/doc" -mindepth 1 -not -type d -not -name copyright -delete
    find "$r/usr/share/doc" -mindepth 1 -type d -empty -delete
    for p in usr/share/man usr/share/locale usr/share/info usr/share/lintian usr/share/gdb \
        "usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)/gconv" \
        var/cache var/lib/apt var/log etc/apt etc/dpkg etc/hostname etc/resolv.conf etc/fstab dev proc sys run; do
        rm -rf "${r:?}/$p"
    done
    tar -C "$r" -cf "$cache.tmp" .
    mv "$cache.tmp" "$cache"
    find "$OUT/cache" -maxdepth 1 -name 'packages-*.tar' -not -name "packages-$key.tar" -delete
    rm -rf "$tmp"
    trap - EXIT
fi

# --- run stage: the root filesystem -----------------------------------------
rootfs=${OUT:?}/rootfs
rm -rf "$rootfs"
mkdir -p "$rootfs"
tar -C "$rootfs" -xf "$cache"
install -D -m 0755 "$BINARY" "$rootfs/usr/bin/mlwatch"
strip --strip-unneeded "$rootfs/usr/bin/mlwatch"
printf '%s\n' 'root:x:0:0:root:/root:/usr/sbin/nologin' \
    'nonroot:x:65532:65532:mlwatch:/var/lib/mlwatch:/usr/sbin/nologin' \
    'nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin' >"$rootfs/etc/passwd"
printf '%s\n' 'root:x:0:' 'nonroot:x:65532:' 'nogroup:x:65534:' >"$rootfs/etc/group"
printf '%s\n' 'passwd: files' 'group: files' 'hosts: files dns' >"$rootfs/etc/nsswitch.conf"
mkdir -p "$rootfs/var/lib/mlwatch" "$rootfs/tmp" "$rootfs/proc" "$rootfs/sys" "$rootfs/dev" "$rootfs/host"
chmod 1777 "$rootfs/var/lib/mlwatch" "$rootfs/tmp"
awk '/^Package:/ {p=$2} /^Version:/ {print p, $2}' "$rootfs/var/lib/dpkg/status" | LC_ALL=C sort \
    >"$OUT/packages.txt"

# One layer, byte for byte the same for the same inputs: sorted names,
# SOURCE_DATE_EPOCH times, numeric root ownership, no atime/ctime.
(cd "$rootfs" && find . -mindepth 1 | sed 's|^\./||' | LC_ALL=C sort) >"$OUT/layer.list"
tar -C "$rootfs" --no-recursion -T "$OUT/layer.list" --format=posix \
    --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
    --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner -cf "$OUT/layer.tar"

# --- the image ----------------------------------------------------------------
created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
layout=${OUT:?}/oci
rm -rf "$layout"
umoci init --layout "$layout"
umoci new --image "$layout:$MW_VERSION"
umoci raw add-layer --image "$layout:$MW_VERSION" --history.created "$created" \
    --history.created_by "scripts/build-image.sh" "$OUT/layer.tar"
revision=$(git -C "$SRC" rev-parse HEAD 2>/dev/null || echo unknown)
umoci config --image "$layout:$MW_VERSION" --created "$created" --os linux --architecture "$ARCH" \
    --author "mlwatch" --history.created "$created" --history.created_by "scripts/build-image.sh (config)" \
    --config.user 65532:65532 --config.entrypoint /usr/bin/mlwatch --config.cmd agent \
    --config.workingdir /var/lib/mlwatch --config.env PATH=/usr/bin \
    --config.exposedports 10230/tcp \
    --config.label org.opencontainers.image.title=mlwatch \
    --config.label org.opencontainers.image.version="$MW_VERSION" \
    --config.label org.opencontainers.image.revision="$revision" \
    --config.label org.opencontainers.image.source=https://github.com/mlwatch/mlwatch \
    --config.label org.opencontainers.image.base.name=debian:bookworm \
    --manifest.annotation org.opencontainers.image.version="$MW_VERSION" \
    --manifest.annotation org.opencontainers.image.created="$created"
umoci gc --layout "$layout"
archive=$OUT/mlwatch-$MW_VERSION.oci.tar
rm -f "$archive"
skopeo copy --quiet "oci:$layout:$MW_VERSION" "oci-archive:$archive:$REF"

digest=$(skopeo inspect --raw "oci:$layout:$MW_VERSION" | sha256sum | cut -d' ' -f1)
echo "$REF" >"$OUT/ref"
echo "sha256:$digest" >"$OUT/digest"
# Compressed size: what a registry stores and a node downloads.
manifest=$layout/blobs/sha256/$digest
size=$(python3 - "$layout" "$manifest" <<'EOF'
import json, os, sys
layout, manifest = sys.argv[1], sys.argv[2]
m = json.load(open(manifest))
print(os.path.getsize(manifest) + m["config"]["size"] + sum(l["size"] for l in m["layers"]))
EOF
)
echo "$size" >"$OUT/size.txt"
echo "image $REF"
echo "  digest sha256:$digest"
echo "  compressed $size bytes ($((size / 1024 / 1024)) MiB), root filesystem $(du -sk "$rootfs" | cut -f1) KiB, $(wc -l <"$OUT/packages.txt") Debian packages"
echo "  archive $archive"
echo "  built in $(($(date +%s) - started)) s"
