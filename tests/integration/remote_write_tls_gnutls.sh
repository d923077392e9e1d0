#!/usr/bin/env bash
# remote_write_tls_gnutls.sh - remote_write_tls.sh with libcurl-gnutls as the
# libcurl the agent loads (the one hosts without libcurl4 have): GnuTLS must
# work for it though the agent skips GnuTLS's start before main().
export MLWATCH_LIBCURL=gnutls
source "$(dirname "$0")/remote_write_tls.sh"
