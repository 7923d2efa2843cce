#!/usr/bin/env bash
# Prints the directory holding etcd, kube-apiserver, kube-controller-manager and
# kube-scheduler, building them from the pinned wrapper modules on a cache miss.
# All progress goes to stderr so callers can capture stdout as the directory.
set -euo pipefail

K8S_VERSION=v1.36.3
ETCD_VERSION=v3.6.8
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bins=(etcd kube-apiserver kube-controller-manager kube-scheduler)

log() { echo "[controlplane/build] $*" >&2; }
has_all() {
  local b
  for b in "${bins[@]}"; do [[ -x "$1/$b" ]] || return 1; done
}

# envtest-style asset dirs usually lack the controller-manager and scheduler;
# tests that need them check for the binaries and skip.
if [[ -n "${KUBEBUILDER_ASSETS:-}" ]]; then
  if [[ -x "$KUBEBUILDER_ASSETS/etcd" && -x "$KUBEBUILDER_ASSETS/kube-apiserver" ]]; then
    for b in kube-controller-manager kube-scheduler; do
      [[ -x "$KUBEBUILDER_ASSETS/$b" ]] ||
        log "note: $b absent from KUBEBUILDER_ASSETS; scenarios that need it will be skipped"
    done
    log "using KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS"
    echo "$KUBEBUILDER_ASSETS"
    exit 0
  fi
  log "KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS lacks etcd or kube-apiserver; using the build cache instead"
fi

cache_root=${OWNERREFS_CP_CACHE:-$HOME/.cache/ownerrefs-controlplane}
dir=$cache_root/k8s-$K8S_VERSION-etcd-$ETCD_VERSION

if has_all "$dir"; then
  log "cache hit: $dir"
  echo "$dir"
  exit 0
fi

command -v go >/dev/null || { log "go is not on PATH; cannot build $dir"; exit 1; }
mkdir -p "$cache_root"
# Build into a sibling temp dir and rename it into place, so an interrupted
# build can never leave a directory that looks complete.
# Temp dirs of builds that were SIGKILLed; a live build is never this old.
find "$cache_root" -maxdepth 1 -name '.building.*' -mmin +180 -exec rm -rf {} + 2>/dev/null || true
tmp=$(mktemp -d "$cache_root/.building.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM HUP

# No -trimpath: it changes every compile action ID, so a build with it could not
# reuse Go build-cache entries from a plain `go build` of the same modules.
# The -X flags make /version report the pinned release instead of v0.0.0-master.
vpkg=k8s.io/component-base/version
k8s_ldflags="-s -w -X $vpkg.gitVersion=$K8S_VERSION -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=36 -X $vpkg.gitTreeState=clean"

start=$SECONDS
log "building kube-apiserver, kube-controller-manager, kube-scheduler $K8S_VERSION (cold: ~4 min on 2 cores)"
(cd "$here/k8s" && go build -ldflags="$k8s_ldflags" -o "$tmp/" \
  k8s.io/kubernetes/cmd/kube-apiserver \
  k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler)
log "kubernetes binaries built in $((SECONDS - start))s"

start=$SECONDS
log "building etcd $ETCD_VERSION"
(cd "$here/etcd" && go build -ldflags="-s -w" -o "$tmp/etcd" go.etcd.io/etcd/server/v3)
log "etcd built in $((SECONDS - start))s"

has_all "$tmp" || { log "build finished but binaries are missing in $tmp"; exit 1; }
chmod 0755 "$tmp"

# A partial dir can only come from manual tinkering; move it aside first.
if [[ -e "$dir" ]] && ! has_all "$dir"; then
  rm -rf "$dir.stale"
  mv -T "$dir" "$dir.stale"
  rm -rf "$dir.stale"
fi
if ! mv -T "$tmp" "$dir" 2>/dev/null; then
  # A concurrent build.sh won the rename; its result is just as good.
  has_all "$dir" || { log "could not install $dir"; exit 1; }
fi
log "installed $dir"
echo "$dir"
