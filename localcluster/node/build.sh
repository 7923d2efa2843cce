#!/usr/bin/env bash
# Prints the directory holding what a real node needs besides Debian's containerd and
# runc: the kubelet (built from the same pinned k8s.io/kubernetes as the control plane),
# `hollow` (kubemark's hollow kubelet, ./k8s/hollow, for many nodes on one machine),
# and two OCI image archives made here, since no registry can be reached:
#   busybox.tar  localhost/ownerrefs/busybox:local  Debian's busybox-static and its applets
#   pause.tar    localhost/ownerrefs/pause:local    ./images/pause.c, built static
# Progress goes to stderr; stdout is the directory. Cached under a key of the inputs.
set -euo pipefail

K8S_VERSION=v1.36.3
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bins=(kubelet hollow busybox.tar pause.tar)

# shellcheck source=../cached-build.sh
source "$here/../cached-build.sh"
log() { echo "[node/build] $*" >&2; }

for tool in gcc busybox; do
  command -v "$tool" >/dev/null || { log "$tool is missing: install gcc and busybox-static (.ci/run does)"; exit 1; }
done
key=$(cd "$here" && cat k8s/go.mod k8s/go.sum k8s/hollow/*.go images/* "$(command -v busybox)" | sha256sum | cut -c1-12)
cache_root=${OWNERREFS_NODE_CACHE:-$HOME/.cache/ownerrefs-node}
dir=$cache_root/k8s-$K8S_VERSION-$key

cached_build_begin "$cache_root" "$dir"

vpkg=k8s.io/component-base/version
start=$SECONDS
log "building the kubelet $K8S_VERSION (cold: about 3.5 min on 2 cores; seconds after the control plane's build)"
(cd "$here/k8s" && go build -ldflags="-s -w -X $vpkg.gitVersion=$K8S_VERSION -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=36 -X $vpkg.gitTreeState=clean" \
  -o "$tmp/" k8s.io/kubernetes/cmd/kubelet ./hollow)
log "kubelet and hollow kubelet built in $((SECONDS - start))s"

rootfs=$(mktemp -d)
trap 'kill "$ticker" 2>/dev/null; rm -rf "$tmp" "$rootfs"' EXIT
mkdir -p "$rootfs/bin" "$rootfs/tmp" "$rootfs/etc"
cp "$(command -v busybox)" "$rootfs/bin/busybox"
for applet in $("$rootfs/bin/busybox" --list); do [[ $applet == busybox ]] || ln -s busybox "$rootfs/bin/$applet"; done
echo 'root:x:0:0:root:/:/bin/sh' > "$rootfs/etc/passwd"
echo 'root:x:0:' > "$rootfs/etc/group"
bash "$here/images/oci-archive.sh" "$tmp/busybox.tar" localhost/ownerrefs/busybox:local "$rootfs" '["/bin/sh"]'
rm -rf "${rootfs:?}"/*
gcc -static -Os -o "$rootfs/pause" "$here/images/pause.c"
bash "$here/images/oci-archive.sh" "$tmp/pause.tar" localhost/ownerrefs/pause:local "$rootfs" '["/pause"]'
log "images made"
cached_build_finish "$dir"
