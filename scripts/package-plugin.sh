#!/usr/bin/env bash
# Makes the kubectl plugin's release archive, the same bytes from the same file (fixed owner,
# times and order; gzip without a name or time), and prints its sha256: what the krew
# manifest (kubectl-plugin/ownerrefs.krew.yaml) names. A test checks the two agree.
#   bash scripts/package-plugin.sh [OUT.tar.gz]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:-$here/bench/results/tmp/kubectl-ownerrefs.tar.gz}
mkdir -p "$(dirname "$out")"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 --mode='u=rwx,go=rx' -C "$here/kubectl-plugin" -cf - kubectl-ownerrefs | gzip -n -9 > "$out"
sha256sum "$out" | cut -d' ' -f1
