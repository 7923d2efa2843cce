#!/usr/bin/env bash
# Prints the directory holding csi-sanity and kubeletcsi, building them from this
# wrapper module on a cache miss. All progress goes to stderr so callers can capture
# stdout as the directory. Called by .ci/run and by the CSI e2e tests' setup.
set -euo pipefail

CSI_TEST_VERSION=v5.6.0 # keep in step with go.mod
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bins=(csi-sanity kubeletcsi)

log() { echo "[csi/build] $*" >&2; }
has_all() {
  local b
  for b in "${bins[@]}"; do [[ -x "$1/$b" ]] || return 1; done
}

# kubeletcsi is our own code: its source and the pinned modules are part of the key.
key=$(cd "$here" && cat go.mod go.sum kubeletcsi/*.go | sha256sum | cut -c1-12)
cache_root=${OWNERREFS_CSI_CACHE:-$HOME/.cache/ownerrefs-csi}
dir=$cache_root/csi-test-$CSI_TEST_VERSION-$key

if has_all "$dir"; then
  log "cache hit: $dir"
  echo "$dir"
  exit 0
fi

command -v go >/dev/null || { log "go is not on PATH; cannot build $dir"; exit 1; }
mkdir -p "$cache_root"
# Build into a temp dir and rename it into place, so an interrupted build never
# leaves a directory that looks complete; temp dirs of killed builds are reaped.
find "$cache_root" -maxdepth 1 -name '.building.*' -mmin +60 -exec rm -rf {} + 2>/dev/null || true
tmp=$(mktemp -d "$cache_root/.building.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM HUP

start=$SECONDS
log "building csi-sanity $CSI_TEST_VERSION and kubeletcsi (cold: about 30 s on 2 cores, plus module downloads on a new machine)"
(cd "$here" && go build -ldflags="-s -w" -o "$tmp/" \
  github.com/kubernetes-csi/csi-test/v5/cmd/csi-sanity \
  ./kubeletcsi)
has_all "$tmp" || { log "build finished but binaries are missing in $tmp"; exit 1; }
log "built in $((SECONDS - start))s"
chmod 0755 "$tmp"
if ! mv -T "$tmp" "$dir" 2>/dev/null; then
  # A concurrent build.sh won the rename; its result is just as good.
  has_all "$dir" || { log "could not install $dir"; exit 1; }
fi
log "installed $dir"
echo "$dir"
