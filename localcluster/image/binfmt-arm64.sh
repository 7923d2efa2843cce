#!/usr/bin/env bash
# Lets this amd64 machine run arm64 binaries: Debian's qemu-user-static registered with the
# kernel's binfmt_misc (what `npm run test:release` needs to run the arm64 image's node; the
# image itself builds without it). The F flag opens the interpreter now, so that it also works
# inside containers. Idempotent.
set -euo pipefail
conf=/usr/lib/binfmt.d/qemu-aarch64.conf
[[ -f $conf ]] || { echo "qemu-user-static is missing: apt-get install qemu-user-static (npm run test:release's set-up does)" >&2; exit 1; }
[[ -e /proc/sys/fs/binfmt_misc/register ]] || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
if [[ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]]; then
  cat "$conf" > /proc/sys/fs/binfmt_misc/register
  echo "registered qemu-aarch64 with binfmt_misc" >&2
fi
