#!/usr/bin/env bash
# Builds the agent's image with podman from the repository's Dockerfile and prints the
# path of an OCI archive of it (what the real node's containerd imports). No registry
# serves images here, so the Dockerfile's base (node:24-bookworm-slim) is made locally,
# once, and cached: a Debian bookworm root filesystem from debootstrap (the Debian mirror
# is a package registry), Node 24 from the npm registry's `node` package (the project's
# own devDependency) and npm, with the image's `node` user. Progress goes to stderr.
#
# podman runs with the runc runtime (crun fails on this kernel's hybrid cgroups) and
# without its default ulimits (the machine's hard open-files limit is below them).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
log() { echo "[image/build] $*" >&2; }
BASE=docker.io/library/node:24-bookworm-slim
IMAGE=${OWNERREFS_IMAGE:-localhost/ownerrefs/ownerrefs-agent:dev}

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

node_bin=$root/node_modules/node/bin/node
[[ -x $node_bin ]] || { log "run npm ci first: $node_bin (Node 24) is missing"; exit 1; }
npm_dir=$(npm root -g)/npm
node_version=$("$node_bin" --version)
npm_version=$(node -p "require('$npm_dir/package.json').version")
cache=${OWNERREFS_IMAGE_CACHE:-$HOME/.cache/ownerrefs-image}
mkdir -p "$cache"
# This machine's CA bundle goes into the base too: the registries are reached through a
# TLS-intercepting proxy whose CA only the host's bundle holds (the real base needs none).
ca=/etc/ssl/certs/ca-certificates.crt
ca_key=$( [[ -f $ca ]] && sha256sum "$ca" | cut -c1-12 || echo none)
base_tar=$cache/base-bookworm-node-$node_version-npm-$npm_version-ca-$ca_key.tar

if [[ ! -f $base_tar ]]; then
  log "making the base $BASE: debootstrap bookworm (about a minute), Node $node_version, npm $npm_version"
  rootfs=$(mktemp -d)
  trap 'rm -rf "$rootfs"' EXIT
  debootstrap --variant=minbase bookworm "$rootfs" http://deb.debian.org/debian >&2
  install -m 0755 "$node_bin" "$rootfs/usr/local/bin/node"
  mkdir -p "$rootfs/usr/local/lib/node_modules"
  cp -a "$npm_dir" "$rootfs/usr/local/lib/node_modules/npm"
  ln -s ../lib/node_modules/npm/bin/npm-cli.js "$rootfs/usr/local/bin/npm"
  ln -s ../lib/node_modules/npm/bin/npx-cli.js "$rootfs/usr/local/bin/npx"
  if [[ -f $ca ]]; then mkdir -p "$rootfs/etc/ssl/certs" && cp "$ca" "$rootfs/etc/ssl/certs/ca-certificates.crt"; fi
  chroot "$rootfs" groupadd --gid 1000 node
  chroot "$rootfs" useradd --uid 1000 --gid node --shell /bin/bash --create-home node
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  tar --sort=name --numeric-owner -C "$rootfs" -cf "$base_tar.tmp" .
  mv "$base_tar.tmp" "$base_tar"
fi
if ! pod image exists "$BASE" || [[ $(pod image inspect --format '{{index .Labels "ownerrefs.base"}}' "$BASE" 2>/dev/null) != "$(basename "$base_tar")" ]]; then
  pod import --change "LABEL ownerrefs.base=$(basename "$base_tar")" --change 'CMD ["node"]' \
    --change 'ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt' "$base_tar" "$BASE" >&2
fi

log "building $IMAGE from the Dockerfile"
start=$SECONDS
pod build --network host --pull=never -t "$IMAGE" -f "$root/Dockerfile" "$root" >&2
log "built in $((SECONDS - start))s"
out=$cache/agent-image.tar
rm -f "$out"
pod save --format oci-archive -o "$out" "$IMAGE" >&2
echo "$out"
