#!/usr/bin/env bash
# Prints the directory holding what test/e2e/conformance.test.ts runs Kubernetes' own downward
# API conformance specs with, on the real node, beside this project's ([ownerrefs.dev], ./ownerrefs):
#   e2e.test     upstream's e2e suite (k8s.io/kubernetes/test/e2e at the control plane's pinned
#                version) and ours, in one Ginkgo binary (./suite)
#   agnhost      k8s.io/kubernetes/test/images/agnhost, static
#   agnhost.tar  an OCI image of it, entrypoint /agnhost   } named as the suite asks for them
#   busybox.tar  Debian's busybox-static with its applets   } (test/utils/image/manifest.go)
#   images       "ARCHIVE NAME" per line
# No registry can be reached, so the images are made here (../node/images/oci-archive.sh) and
# imported into the node's containerd; the specs' pull policy IfNotPresent finds them there.
# Needs busybox (busybox-static); exits 1 saying so when it is missing. Progress goes to
# stderr; stdout is the directory. Cached under a key of the inputs.
set -euo pipefail

K8S_VERSION=v1.36.3 # keep in step with go.mod
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bins=(e2e.test agnhost agnhost.tar busybox.tar)
oci=$here/../node/images/oci-archive.sh

# shellcheck source=../cached-build.sh
source "$here/../cached-build.sh"
log() { echo "[conformance/build] $*" >&2; }

command -v busybox >/dev/null || { log "busybox is missing: install busybox-static (npm test does, as root)"; exit 1; }
key=$(cd "$here" && cat build.sh go.mod go.sum suite/*.go ownerrefs/*.go "$oci" "$(command -v busybox)" | sha256sum | cut -c1-12)
cache_root=${OWNERREFS_CONFORMANCE_CACHE:-$HOME/.cache/ownerrefs-conformance}
dir=$cache_root/k8s-$K8S_VERSION-$key

cached_build_begin "$cache_root" "$dir"

rootfs=$(mktemp -d)
trap 'kill "$ticker" 2>/dev/null; rm -rf "$tmp" "$rootfs"' EXIT

# The names the suite gives the images, from the pinned source itself.
manifest=$(cd "$here" && go list -m -f '{{.Dir}}' k8s.io/kubernetes)/test/utils/image/manifest.go
registry=$(sed -n 's/^[[:space:]]*PromoterE2eRegistry:[[:space:]]*"\([^"]*\)",$/\1/p' "$manifest")
image() { sed -n "s/^[[:space:]]*configs\[$1\] = Config{list.PromoterE2eRegistry, \"\([^\"]*\)\", \"\([^\"]*\)\"}$/\1:\2/p" "$manifest"; }
agnhost=$registry/$(image Agnhost)
busybox=$registry/$(image BusyBox)
[[ $agnhost == */agnhost:* && $busybox == */busybox:* ]] || { log "cannot read the image names from $manifest (got '$agnhost', '$busybox')"; exit 1; }

vpkg=k8s.io/component-base/version
start=$SECONDS
log "building e2e.test: Kubernetes $K8S_VERSION's e2e suite with ours (cold: about 3 min on 2 cores after the kubelet's build)"
(cd "$here" && go test -c -vet=off -o "$tmp/e2e.test" \
  -ldflags="-s -w -X $vpkg.gitVersion=$K8S_VERSION -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=36 -X $vpkg.gitTreeState=clean" ./suite)
log "e2e.test built in $((SECONDS - start))s; building agnhost (static)"
start=$SECONDS
(cd "$here" && CGO_ENABLED=0 go build -ldflags="-s -w" -o "$tmp/agnhost" k8s.io/kubernetes/test/images/agnhost)
log "agnhost built in $((SECONDS - start))s; making the images $agnhost and $busybox"

# agnhost: the binary as /agnhost, as upstream's image has it; the downward API specs run
# only its subcommands (mounttest), never a shell.
mkdir -p "$rootfs/tmp" "$rootfs/etc"
cp "$tmp/agnhost" "$rootfs/agnhost"
echo 'root:x:0:0:root:/:/agnhost' > "$rootfs/etc/passwd"
echo 'root:x:0:' > "$rootfs/etc/group"
bash "$oci" "$tmp/agnhost.tar" "$agnhost" "$rootfs" '["/agnhost"]'
# busybox: as the node's (../node/images/build.sh), the applets linked in /bin.
rm -rf "${rootfs:?}"/*
mkdir -p "$rootfs/bin" "$rootfs/tmp" "$rootfs/etc"
cp "$(command -v busybox)" "$rootfs/bin/busybox"
for applet in $("$rootfs/bin/busybox" --list); do [[ $applet == busybox ]] || ln -s busybox "$rootfs/bin/$applet"; done
echo 'root:x:0:0:root:/:/bin/sh' > "$rootfs/etc/passwd"
echo 'root:x:0:' > "$rootfs/etc/group"
bash "$oci" "$tmp/busybox.tar" "$busybox" "$rootfs" '["/bin/sh"]'
printf 'agnhost.tar %s\nbusybox.tar %s\n' "$agnhost" "$busybox" > "$tmp/images"
cached_build_finish "$dir"
