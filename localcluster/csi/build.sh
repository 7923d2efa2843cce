#!/usr/bin/env bash
# Prints the directory holding csi-sanity and kubeletcsi, building them from this
# wrapper module on a cache miss. All progress goes to stderr so callers can capture
# stdout as the directory. Called by .ci/run and by the CSI e2e tests' setup.
set -euo pipefail

CSI_TEST_VERSION=v5.6.0 # keep in step with go.mod
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bins=(csi-sanity kubeletcsi)

# shellcheck source=../cached-build.sh
source "$here/../cached-build.sh"
log() { echo "[csi/build] $*" >&2; }

# kubeletcsi is our own code: its source and the pinned modules are part of the key.
key=$(cd "$here" && cat go.mod go.sum kubeletcsi/*.go | sha256sum | cut -c1-12)
cache_root=${OWNERREFS_CSI_CACHE:-$HOME/.cache/ownerrefs-csi}
dir=$cache_root/csi-test-$CSI_TEST_VERSION-$key

cached_build_begin "$cache_root" "$dir"

start=$SECONDS
log "building csi-sanity $CSI_TEST_VERSION and kubeletcsi (cold: about 30 s on 2 cores, plus module downloads on a new machine)"
(cd "$here" && go build -ldflags="-s -w" -o "$tmp/" \
  github.com/kubernetes-csi/csi-test/v5/cmd/csi-sanity \
  ./kubeletcsi)
log "built in $((SECONDS - start))s"
cached_build_finish "$dir"
