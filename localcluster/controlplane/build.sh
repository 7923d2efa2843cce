#!/usr/bin/env bash
# Prints the directory holding etcd, kube-apiserver, kube-controller-manager, kube-scheduler
# and kubectl, building them from the pinned wrapper modules on a cache miss.
# All progress goes to stderr so callers can capture stdout as the directory.
set -euo pipefail

K8S_VERSION=v1.36.3
ETCD_VERSION=v3.6.8
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bins=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl)

# shellcheck source=../cached-build.sh
source "$here/../cached-build.sh"
log() { echo "[controlplane/build] $*" >&2; }

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

cached_build_begin "$cache_root" "$dir"

# No -trimpath: it changes every compile action ID, so a build with it could not
# reuse Go build-cache entries from a plain `go build` of the same modules.
# The -X flags make /version report the pinned release instead of v0.0.0-master.
vpkg=k8s.io/component-base/version
k8s_ldflags="-s -w -X $vpkg.gitVersion=$K8S_VERSION -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=36 -X $vpkg.gitTreeState=clean"

start=$SECONDS
log "building kube-apiserver, kube-controller-manager, kube-scheduler, kubectl $K8S_VERSION (cold: ~4.5 min on 2 cores)"
(cd "$here/k8s" && go build -ldflags="$k8s_ldflags" -o "$tmp/" \
  k8s.io/kubernetes/cmd/kube-apiserver \
  k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler \
  k8s.io/kubernetes/cmd/kubectl)
log "kubernetes binaries built in $((SECONDS - start))s"

start=$SECONDS
log "building etcd $ETCD_VERSION"
(cd "$here/etcd" && go build -ldflags="-s -w" -o "$tmp/etcd" go.etcd.io/etcd/server/v3)
log "etcd built in $((SECONDS - start))s"

cached_build_finish "$dir"
