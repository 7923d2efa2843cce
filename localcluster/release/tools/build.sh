#!/usr/bin/env bash
# Prints the directory holding the release's tools, building them on a cache miss, like the
# control plane, each from its wrapper module here (its own go.mod pins it; their
# dependencies disagree): cosign (signatures), syft (SBOMs), crane (the image index, and a
# registry on loopback so that cosign signs the index as it signs one in a real registry),
# krew (the plugin's install test) and actionlint (the hosted workflow). Progress goes to
# stderr.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bins=(cosign syft crane krew actionlint)

# shellcheck source=../../cached-build.sh
source "$here/../../cached-build.sh"
log() { echo "[release/tools] $*" >&2; }

key=$(cd "$here" && cat ./*/go.mod ./*/go.sum | sha256sum | cut -c1-12)
cache_root=${OWNERREFS_TOOLS_CACHE:-$HOME/.cache/ownerrefs-tools}
dir=$cache_root/release-$key

cached_build_begin "$cache_root" "$dir"

start=$SECONDS
log "building ${bins[*]} (cold: about 10 min on 2 cores, plus module downloads on a new machine)"
declare -A pkg=(
  [cosign]=github.com/sigstore/cosign/v3/cmd/cosign [syft]=github.com/anchore/syft/cmd/syft
  [crane]=github.com/google/go-containerregistry/cmd/crane [krew]=sigs.k8s.io/krew/cmd/krew
  [actionlint]=github.com/rhysd/actionlint/cmd/actionlint
)
for b in "${bins[@]}"; do
  (cd "$here/$b" && go build -trimpath -ldflags="-s -w" -o "$tmp/" "${pkg[$b]}")
done
log "built in $((SECONDS - start))s"
cached_build_finish "$dir"
