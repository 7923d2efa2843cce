#!/usr/bin/env bash
# Prints a directory like the control plane's (localcluster/controlplane/build.sh) but with
# the oldest Kubernetes release this project supports: kube-apiserver, kube-controller-manager,
# kube-scheduler and the kubelet built from the pinned wrapper module here, beside links to
# the main build's etcd and kubectl. OWNERREFS_K8S=oldest makes the tests, the demo and the
# benchmarks use it. Why this release: docs/INSTALL.md, "Supported versions".
# Progress goes to stderr; stdout is the directory. Cached under a key of the inputs.
set -euo pipefail

K8S_VERSION=v1.30.14 # keep in step with go.mod
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bins=(kube-apiserver kube-controller-manager kube-scheduler kubelet etcd kubectl)

# shellcheck source=../cached-build.sh
source "$here/../cached-build.sh"
log() { echo "[oldest/build] $*" >&2; }

main=$(bash "$here/../controlplane/build.sh")
key=$(cd "$here" && cat go.mod go.sum tools.go | sha256sum | cut -c1-12)
cache_root=${OWNERREFS_OLDEST_CACHE:-$HOME/.cache/ownerrefs-oldest}
dir=$cache_root/k8s-$K8S_VERSION-$key

cached_build_begin "$cache_root" "$dir"

vpkg=k8s.io/component-base/version
minor=${K8S_VERSION#v1.}
minor=${minor%%.*}
start=$SECONDS
log "building kube-apiserver, kube-controller-manager, kube-scheduler and the kubelet $K8S_VERSION (cold: about 5 min on 2 cores)"
(cd "$here" && go build -ldflags="-s -w -X $vpkg.gitVersion=$K8S_VERSION -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=$minor -X $vpkg.gitTreeState=clean" -o "$tmp/" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet)
ln -s "$main/etcd" "$tmp/etcd"
ln -s "$main/kubectl" "$tmp/kubectl"
log "built in $((SECONDS - start))s"
cached_build_finish "$dir"
