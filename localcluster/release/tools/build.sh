#!/usr/bin/env bash
# Prints the directory holding one of the release's tools, building it on a cache miss,
# like the control plane, from its wrapper module here (its own go.mod pins it; their
# dependencies disagree): cosign (signatures), syft (SBOMs), crane (the image index, and a
# registry on loopback so that cosign signs the index as it signs one in a real registry),
# krew (the plugin's install test) or actionlint (the hosted workflow). Progress goes to
# stderr.
#
#   bash localcluster/release/tools/build.sh TOOL
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
declare -A pkg=(
  [cosign]=github.com/sigstore/cosign/v3/cmd/cosign [syft]=github.com/anchore/syft/cmd/syft
  [crane]=github.com/google/go-containerregistry/cmd/crane [krew]=sigs.k8s.io/krew/cmd/krew
  [actionlint]=github.com/rhysd/actionlint/cmd/actionlint
)
tool=${1:-}
[[ -n $tool && -n ${pkg[$tool]:-} ]] || { echo "usage: build.sh ${!pkg[*]}" | sed 's/ /|/g; s/usage:|build.sh|/usage: build.sh /' >&2; exit 2; }
bins=("$tool")

# shellcheck source=../../cached-build.sh
source "$here/../../cached-build.sh"
log() { echo "[release/tools] $*" >&2; }

key=$(cd "$here/$tool" && cat go.mod go.sum | sha256sum | cut -c1-12)
cache_root=${OWNERREFS_TOOLS_CACHE:-$HOME/.cache/ownerrefs-tools}
dir=$cache_root/release-$tool-$key

cached_build_begin "$cache_root" "$dir"

start=$SECONDS
log "building $tool (cold: cosign and syft about 4 min each on 2 cores, the others about 1; plus module downloads on a new machine)"
(cd "$here/$tool" && go build -trimpath -ldflags="-s -w" -o "$tmp/" "${pkg[$tool]}")
log "built in $((SECONDS - start))s"
cached_build_finish "$dir"
