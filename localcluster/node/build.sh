#!/usr/bin/env bash
# Prints the directory holding the kubelet (built from the same pinned k8s.io/kubernetes as
# the control plane) and `hollow` (kubemark's hollow kubelet, ./k8s/hollow, for many nodes
# on one machine). The real node's images are made apart (./images/build.sh): a hollow node
# needs none of them, nor the tools that make them. Progress goes to stderr; stdout is the
# directory. Cached under a key of the inputs.
set -euo pipefail

K8S_VERSION=v1.36.3
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bins=(kubelet hollow)

# shellcheck source=../cached-build.sh
source "$here/../cached-build.sh"
log() { echo "[node/build] $*" >&2; }

key=$(cd "$here" && cat k8s/go.mod k8s/go.sum k8s/hollow/*.go | sha256sum | cut -c1-12)
cache_root=${OWNERREFS_NODE_CACHE:-$HOME/.cache/ownerrefs-node}
dir=$cache_root/k8s-$K8S_VERSION-$key

cached_build_begin "$cache_root" "$dir"

vpkg=k8s.io/component-base/version
start=$SECONDS
log "building the kubelet $K8S_VERSION (cold: about 3.5 min on 2 cores; seconds after the control plane's build)"
(cd "$here/k8s" && go build -ldflags="-s -w -X $vpkg.gitVersion=$K8S_VERSION -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=36 -X $vpkg.gitTreeState=clean" \
  -o "$tmp/" k8s.io/kubernetes/cmd/kubelet ./hollow)
log "kubelet and hollow kubelet built in $((SECONDS - start))s"
cached_build_finish "$dir"
