#!/usr/bin/env bash
# Prints a directory like the control plane's (localcluster/controlplane/build.sh) but with an
# older Kubernetes release than the one this project is developed on: kube-apiserver,
# kube-controller-manager, kube-scheduler and the kubelet built from the pinned wrapper module
# localcluster/versions/<minor>/ (made by pin.sh), beside links to the main build's etcd and
# kubectl. OWNERREFS_K8S=<minor> (or =oldest, the oldest supported) makes the tests, the demo
# and the benchmarks use it. Supported versions: docs/INSTALL.md.
# Progress goes to stderr; stdout is the directory. Cached under a key of the inputs.
#
#   bash localcluster/versions/build.sh 1.30      (or: oldest)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
minor=${1:?usage: build.sh MINOR (1.30 to 1.35) or oldest}
[[ $minor == oldest ]] && minor=1.30
module=$here/$minor
[[ -f $module/go.mod ]] || { echo "[versions/build] no pinned module for Kubernetes $minor (localcluster/versions/pin.sh makes one)" >&2; exit 2; }
K8S_VERSION=$(sed -n 's/^require k8s.io\/kubernetes \(v[0-9.]*\)$/\1/p' "$module/go.mod")
bins=(kube-apiserver kube-controller-manager kube-scheduler kubelet etcd kubectl)

# shellcheck source=../cached-build.sh
source "$here/../cached-build.sh"
log() { echo "[versions/build] $*" >&2; }

main=$(bash "$here/../controlplane/build.sh")
key=$(cd "$module" && cat go.mod go.sum tools.go | sha256sum | cut -c1-12)
cache_root=${OWNERREFS_VERSIONS_CACHE:-$HOME/.cache/ownerrefs-k8s}
dir=$cache_root/k8s-$K8S_VERSION-$key

cached_build_begin "$cache_root" "$dir"

vpkg=k8s.io/component-base/version
start=$SECONDS
log "building kube-apiserver, kube-controller-manager, kube-scheduler and the kubelet $K8S_VERSION (cold: about 5 min on 2 cores)"
(cd "$module" && go build -ldflags="-s -w -X $vpkg.gitVersion=$K8S_VERSION -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=${minor#1.} -X $vpkg.gitTreeState=clean" -o "$tmp/" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet)
ln -s "$main/etcd" "$tmp/etcd"
ln -s "$main/kubectl" "$tmp/kubectl"
log "built in $((SECONDS - start))s"
cached_build_finish "$dir"
