#!/usr/bin/env bash
# Prints the directory holding one of the release's tools, building it on a cache miss,
# like the control plane, from its wrapper module here (its own go.mod pins it; their
# dependencies disagree): cosign (signatures), syft (SBOMs), crane (the image index, and a
# registry on loopback so that cosign signs the index as it signs one in a real registry),
# krew (the plugin's install test), actionlint (the hosted workflow) or skopeo (a
# containers-policy.json's verdict on the image, as podman's). Progress goes to
# stderr.
#
#   bash localcluster/release/tools/build.sh TOOL
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
declare -A pkg=(
  [cosign]=github.com/sigstore/cosign/v3/cmd/cosign [syft]=github.com/anchore/syft/cmd/syft
  [crane]=github.com/google/go-containerregistry/cmd/crane [krew]=sigs.k8s.io/krew/cmd/krew
  [actionlint]=github.com/rhysd/actionlint/cmd/actionlint [skopeo]=github.com/containers/skopeo/cmd/skopeo
)
# skopeo: pure Go (OpenPGP in Go, not gpgme; no btrfs or devicemapper storage), so that it
# needs no C libraries; the release test uses it for containers-policy.json alone.
declare -A tags=([skopeo]="containers_image_openpgp exclude_graphdriver_btrfs exclude_graphdriver_devicemapper")
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
flags=(-trimpath -ldflags="-s -w")
[[ -z ${tags[$tool]:-} ]] || { flags+=(-tags "${tags[$tool]}"); export CGO_ENABLED=0; }
(cd "$here/$tool" && go build "${flags[@]}" -o "$tmp/" "${pkg[$tool]}")
log "built in $((SECONDS - start))s"
cached_build_finish "$dir"
