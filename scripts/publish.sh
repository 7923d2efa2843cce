#!/usr/bin/env bash
# Publishes what `npm run release` built in dist/release-VERSION/ (the hosted release
# workflow's last step, .github/workflows/release.yaml):
#
#   1. the image index, its images, its signature and attestations, to $IMAGE:VERSION, and
#      each platform image with its signature to $IMAGE:VERSION-linux-ARCH (`cosign load`);
#   2. the chart, to the OCI chart repository $CHARTS (`helm push`);
#   3. every file, to the GitHub release vVERSION (`gh release create`).
#
#   IMAGE=ghcr.io/OWNER/ownerrefs-agent CHARTS=oci://ghcr.io/OWNER/charts bash scripts/publish.sh [--dry-run]
#
# REGISTRY_USER and REGISTRY_TOKEN, if set, log cosign and helm in to the registries first.
# --dry-run publishes 1 and 2 to a registry on loopback instead (IMAGE and CHARTS are then
# ignored), checks what arrived there (the signature, with dist's cosign.pub; the chart, pulled
# back byte for byte), and prints step 3's command instead of running it.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
log() { echo "[publish] $*" >&2; }
die() { echo "publish: $*" >&2; exit 1; }
V=$(node -p "require('./package.json').version")
rel=dist/release-$V
[[ -d $rel ]] || die "$rel is missing: npm run release first"
(cd "$rel" && sha256sum --quiet -c SHA256SUMS) || die "$rel does not match its SHA256SUMS"
dry=${1:-}
PATH=$(bash localcluster/tools/build.sh):$PATH
for t in cosign crane; do PATH=$(bash localcluster/release/tools/build.sh "$t"):$PATH; done
export PATH
insecure=()
registry=
layout=$(mktemp -d)
trap 'rm -rf "$layout"; [[ -z $registry ]] || kill "$registry" 2>/dev/null || true' EXIT
if [[ $dry == --dry-run ]]; then
  port=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
  crane registry serve --address "127.0.0.1:$port" >/dev/null 2>&1 &
  registry=$!
  for _ in $(seq 50); do crane catalog --insecure "127.0.0.1:$port" >/dev/null 2>&1 && break; sleep 0.1; done
  IMAGE=127.0.0.1:$port/ownerrefs-agent CHARTS=oci://127.0.0.1:$port/charts
  insecure=(--allow-insecure-registry)
fi
: "${IMAGE:?set IMAGE (the repository of the image, e.g. ghcr.io/OWNER/ownerrefs-agent)}" "${CHARTS:?set CHARTS (e.g. oci://ghcr.io/OWNER/charts)}"

# Credentials for the registry that holds both (the workflow's token), if given.
if [[ -n ${REGISTRY_USER:-} && $dry != --dry-run ]]; then
  cosign login "${IMAGE%%/*}" --username "$REGISTRY_USER" --password "$REGISTRY_TOKEN" >&2
  helm registry login "$(echo "${CHARTS#oci://}" | cut -d/ -f1)" --username "$REGISTRY_USER" --password-stdin <<<"$REGISTRY_TOKEN" >&2
fi

# 1. The image index with its signature.
tar -xf "$rel/ownerrefs-agent-image-$V.oci.tar" -C "$layout"
cosign load "${insecure[@]}" --dir "$layout" "$IMAGE:$V" >&2
# Each platform image with its own signature (what podman and CRI-O verify on a pull).
for p in "$layout"/platforms/*; do cosign load "${insecure[@]}" --dir "$p" "$IMAGE:$V-${p##*/}" >&2; done
log "image $IMAGE:$V ($(cat "$rel/ownerrefs-agent-image-$V.digest"))"

# 2. The chart.
helm push "$rel/ownerrefs-agent-$V.tgz" "$CHARTS" ${insecure:+--plain-http} >&2
log "chart $CHARTS/ownerrefs-agent:$V"

# 3. The release's files.
files=$(cd "$rel" && ls | sort | sed "s|^|$rel/|" | tr '\n' ' ')
if [[ $dry == --dry-run ]]; then
  # What arrived: the signature verifies with the release's key, the digest is the built one,
  # and the chart pulled back is the packaged one.
  if [[ -f $rel/cosign.pub ]]; then
    cosign verify "${insecure[@]}" --insecure-ignore-tlog --key "$rel/cosign.pub" "$IMAGE:$V" >/dev/null 2>&1 || die "the image's signature does not verify at $IMAGE:$V"
  fi
  [[ $(crane digest --insecure "$IMAGE:$V") == "$(cat "$rel/ownerrefs-agent-image-$V.digest")" ]] || die "$IMAGE:$V is not the built index"
  pulled=$(mktemp -d)
  helm pull "$CHARTS/ownerrefs-agent" --version "$V" --plain-http --destination "$pulled" >/dev/null
  cmp -s "$pulled/ownerrefs-agent-$V.tgz" "$rel/ownerrefs-agent-$V.tgz" || die "the chart pulled back from $CHARTS differs"
  rm -rf "$pulled"
  log "dry run: published to $IMAGE and $CHARTS and checked; would run: gh release create v$V --verify-tag --notes-file <(CHANGELOG's section) $files"
else
  gh release create "v$V" --verify-tag --title "v$V" --notes-file <(awk -v v="$V" '$0 ~ "^## \\[" v "\\]" { on = 1; next } /^## \[/ { on = 0 } on' CHANGELOG.md) $files
  log "GitHub release v$V"
fi
