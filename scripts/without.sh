#!/usr/bin/env bash
# without.sh TOOL[,TOOL...] COMMAND [ARG...]
# Runs COMMAND with PATH rebuilt as one directory of links to everything on PATH but the
# named tools: how the fallbacks of a machine that lacks them are exercised on one that has them.
set -euo pipefail
hide=",$1,"
shift
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
IFS=: read -ra dirs <<< "$PATH"
for d in "${dirs[@]}"; do
  for f in "$d"/*; do
    n=${f##*/}
    [[ -x $f && ! -e $dir/$n && $hide != *",$n,"* ]] && ln -s "$f" "$dir/$n"
  done
done
PATH=$dir "$@"
