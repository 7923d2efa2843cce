#!/usr/bin/env bash
# Prints the directory holding the real node's two OCI image archives, made here since no
# registry can be reached:
#   busybox.tar  localhost/ownerrefs/busybox:local  Debian's busybox-static and its applets, and
#                                                   ./watch-dir.c (an inotify watcher), built static
#   pause.tar    localhost/ownerrefs/pause:local    ./pause.c, built static
# Needs busybox (busybox-static) and gcc with libc6-dev; exits 1 saying so when they are
# missing. Progress goes to stderr; stdout is the directory. Cached under a key of the inputs.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bins=(busybox.tar pause.tar)

# shellcheck source=../../cached-build.sh
source "$here/../../cached-build.sh"
log() { echo "[node/images] $*" >&2; }

for tool in gcc busybox; do
  command -v "$tool" >/dev/null || { log "$tool is missing: install gcc and busybox-static (npm test and npm run demo do, as root)"; exit 1; }
done
key=$(cd "$here" && cat ./* "$(command -v busybox)" | sha256sum | cut -c1-12)
cache_root=${OWNERREFS_NODE_CACHE:-$HOME/.cache/ownerrefs-node}
dir=$cache_root/images-$key

cached_build_begin "$cache_root" "$dir"

rootfs=$(mktemp -d)
trap 'kill "$ticker" 2>/dev/null; rm -rf "$tmp" "$rootfs"' EXIT
mkdir -p "$rootfs/bin" "$rootfs/tmp" "$rootfs/etc"
cp "$(command -v busybox)" "$rootfs/bin/busybox"
for applet in $("$rootfs/bin/busybox" --list); do [[ $applet == busybox ]] || ln -s busybox "$rootfs/bin/$applet"; done
gcc -static -Os -o "$rootfs/bin/watch-dir" "$here/watch-dir.c"
echo 'root:x:0:0:root:/:/bin/sh' > "$rootfs/etc/passwd"
echo 'root:x:0:' > "$rootfs/etc/group"
bash "$here/oci-archive.sh" "$tmp/busybox.tar" localhost/ownerrefs/busybox:local "$rootfs" '["/bin/sh"]'
rm -rf "${rootfs:?}"/*
gcc -static -Os -o "$rootfs/pause" "$here/pause.c"
bash "$here/oci-archive.sh" "$tmp/pause.tar" localhost/ownerrefs/pause:local "$rootfs" '["/pause"]'
log "images made"
cached_build_finish "$dir"
