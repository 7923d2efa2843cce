#!/usr/bin/env bash
# npm run release: every artifact of one version, built from this checkout into
# dist/release-VERSION/.
#
#   bash scripts/release.sh [--check-version | --smoke]
#
# --check-version does step 1 alone. --smoke (the test suite's, within CI's time) builds into
# dist/release-VERSION-smoke/ the amd64 image alone (podman's OCI archive, no index), the
# chart, the plugin and SHA256SUMS: no arm64, signature or SBOM, and so none of cosign, syft
# or crane to build on a new machine.
#
#   1. The version: package.json's. Chart.yaml's version and appVersion, the chart's image
#      tag, the manifests' images and the krew manifest must say the same, CHANGELOG.md must
#      have its section, and the chart's default architectures must be the ones built, or it
#      stops here.
#   2. The image for linux/amd64 and linux/arm64 (localcluster/image/build.sh), pushed to a
#      registry on loopback as one OCI image index, and signed there by cosign. The signature
#      names $OWNERREFS_IMAGE_REPOSITORY:V (default ghcr.io/ownerrefs-dev/ownerrefs-agent),
#      what users pull, not the loopback registry's address; with the tag, so that podman's
#      exact and remapped identities accept it as well as its matchRepository.
#   3. Each image's SBOM (CycloneDX JSON, by syft: Debian's packages, Node, the npm packages
#      it ships) and the build's SLSA provenance (scripts/provenance.ts), attached to the
#      index as signed attestations (`cosign verify-attestation --type cyclonedx` or
#      `slsaprovenance1`), and kept as files too.
#   4. dist/ownerrefs-agent-image-V.oci.tar: that index with both images, the signature and
#      the attestations (`cosign save`), an OCI image layout in a tar; in its directory
#      platforms/linux-ARCH/, each platform image with its own signature, a layout each.
#   5. The chart, packaged (`helm package`): dist/ownerrefs-agent-V.tgz.
#   6. The kubectl plugin's archive and its krew manifest, whose sha256 is the archive's.
#   7. The npm dependencies' SBOM (from the lockfile); cosign.pub; the chart's signature
#      bundle; SHA256SUMS of every file; its own bundle.
#
# Signatures: scripts/sign.sh, with $COSIGN_KEY (and $COSIGN_PASSWORD), else a key pair made
# once in ~/.config/ownerrefs/. OWNERREFS_SIGN=keyless signs with the ambient OIDC identity
# instead (the hosted workflow's) and records the signatures in Sigstore's public log; dist
# then has no cosign.pub. The tools come from pinned Go modules (localcluster/release/tools),
# helm from localcluster/tools.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
log() { echo "[release] $*" >&2; }
die() { echo "release: $*" >&2; exit 1; }
started=$SECONDS
started_at=$(date +%s)

# 1. One version everywhere.
V=$(node -p "require('./package.json').version")
[[ $V =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] || die "package.json's version $V is not MAJOR.MINOR.PATCH"
REPO=${OWNERREFS_IMAGE_REPOSITORY:-ghcr.io/ownerrefs-dev/ownerrefs-agent}
check() { # FILE WHAT FOUND
  [[ $3 == "$V" ]] || die "$1: $2 is '$3', not the release's version $V (package.json): change it, or package.json"
}
chart=charts/ownerrefs-agent
check "$chart/Chart.yaml" version "$(sed -n 's/^version: *//p' "$chart/Chart.yaml" | tr -d '"')"
check "$chart/Chart.yaml" appVersion "$(sed -n 's/^appVersion: *//p' "$chart/Chart.yaml" | tr -d '"')"
check "$chart/values.yaml" image.tag "$(sed -n '/^image:/,/^[^ ]/s/^  tag: *//p' "$chart/values.yaml" | tr -d '"')"
for f in daemonset.yaml webhook.yaml admission-policy.yaml; do
  while read -r img; do check "$f" "image $img" "${img##*:}"; done < <(sed -n "s|^ *image: *\"\{0,1\}\($REPO:[^\"]*\)\"\{0,1\}$|\1|p" "$f")
done
grep -q "^## \[$V\] - [0-9]\{4\}-[0-9]\{2\}-[0-9]\{2\}$" CHANGELOG.md ||
  die "CHANGELOG.md: no section '## [$V] - YYYY-MM-DD' (the release's notes)"
# What each platform's image may weigh compressed, as a node pulls it.
MAX_IMAGE_BYTES=50000000
# The architectures built are the ones the chart's agent runs on by default, no more, no fewer.
ARCHES=(amd64 arm64)
[[ $(sed -n 's/^architectures: *//p' "$chart/values.yaml") == "[$(IFS=,; echo "${ARCHES[*]}" | sed 's/,/, /g')]" ]] ||
  die "$chart/values.yaml: architectures is not [${ARCHES[*]}], the architectures the release builds"
check kubectl-plugin/ownerrefs.krew.yaml spec.version "$(sed -n 's/^  version: *v//p' kubectl-plugin/ownerrefs.krew.yaml)"
log "version $V"
mode=${1:-full}
[[ $mode == --check-version ]] && exit 0
[[ $mode == full || $mode == --smoke ]] || die "unknown argument $mode (--check-version, --smoke)"
smoke=$([[ $mode == --smoke ]] && echo 1 || true)
final=dist/release-$V${smoke:+-smoke}

mkdir -p dist
out=$final.tmp
rm -rf "$out" && mkdir -p "$out"
PATH=$(bash localcluster/tools/build.sh):$PATH

# Steps 2 to 4: each architecture's image (its OCI archive in image_tar), pushed to a registry
# on loopback; one index of them there, signed, with its attestations; saved as an OCI layout tar.
image_index() {
  local port registry reg digest arch t0 sbom bytes
  port=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
  crane registry serve --address "127.0.0.1:$port" >/dev/null 2>&1 &
  registry=$!
  trap "kill $registry 2>/dev/null || true" EXIT
  reg=127.0.0.1:$port/ownerrefs-agent
  for _ in $(seq 50); do crane catalog "127.0.0.1:$port" --insecure >/dev/null 2>&1 && break; sleep 0.1; done
  for arch in "${ARCHES[@]}"; do
    t0=$SECONDS
    image_tar[$arch]=$(OWNERREFS_IMAGE_ARCH=$arch OWNERREFS_IMAGE="localhost/ownerrefs/ownerrefs-agent:$V-$arch" bash localcluster/image/build.sh)
    podman --runtime runc push --tls-verify=false --format oci "localhost/ownerrefs/ownerrefs-agent:$V-$arch" "docker://$reg:$V-$arch" >&2
    # What a node pulls: the layers as the registry holds them.
    bytes=$(crane manifest --insecure "$reg:$V-$arch" | node -e 'let s="";process.stdin.on("data",(d)=>s+=d).on("end",()=>console.log(JSON.parse(s).layers.reduce((n,l)=>n+l.size,0)))')
    log "image linux/$arch in $((SECONDS - t0)) s: $(node -p "($bytes/1e6).toFixed(1)") MB compressed"
    (( bytes <= MAX_IMAGE_BYTES )) || die "the linux/$arch image is $bytes bytes compressed, over $MAX_IMAGE_BYTES (docs/INSTALL.md#the-image says what it holds)"
  done
  crane index append --insecure $(printf -- "-m $reg:$V-%s " "${ARCHES[@]}") -t "$reg:$V" >/dev/null
  digest=$(crane digest --insecure "$reg:$V")
  bash scripts/sign.sh image "$reg@$digest" "$REPO:$V"
  for arch in "${ARCHES[@]}"; do
    sbom=$out/ownerrefs-agent-image-$V-linux-$arch.cdx.json
    syft scan --quiet --source-name ownerrefs-agent --source-version "$V-linux-$arch" "oci-archive:${image_tar[$arch]}" -o "cyclonedx-json=$sbom"
    bash scripts/sign.sh attest cyclonedx "$sbom" "$reg@$digest"
  done
  "$root/node_modules/node/bin/node" scripts/provenance.ts --version "$V" --repository "$REPO" $(printf -- '--arch %s ' "${ARCHES[@]}") \
    --started "$(date -u -d "@$started_at" +%Y-%m-%dT%H:%M:%SZ)" > "$out/ownerrefs-agent-$V.provenance.json"
  bash scripts/sign.sh attest slsaprovenance1 "$out/ownerrefs-agent-$V.provenance.json" "$reg@$digest"
  local layout=$out/.layout
  cosign save --allow-insecure-registry --dir "$layout" "$reg:$V" >&2
  # cosign save keeps the index's own signature only: each platform image, with its signature,
  # goes into a layout of its own inside (ignored by a `cosign load` of the top).
  for arch in "${ARCHES[@]}"; do
    cosign save --allow-insecure-registry --dir "$layout/platforms/linux-$arch" "$reg@$(crane digest --insecure "$reg:$V-$arch")" >&2
  done
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$layout" -cf "$out/ownerrefs-agent-image-$V.oci.tar" .
  rm -rf "$layout"
  echo "$digest" > "$out/ownerrefs-agent-image-$V.digest"
}

declare -A image_tar
if [[ -n $smoke ]]; then
  t0=$SECONDS
  cp "$(OWNERREFS_IMAGE="localhost/ownerrefs/ownerrefs-agent:$V" bash localcluster/image/build.sh)" "$out/ownerrefs-agent-image-$V-linux-amd64.oci.tar"
  log "image linux/amd64 in $((SECONDS - t0)) s"
else
  for t in cosign syft crane; do PATH=$(bash localcluster/release/tools/build.sh "$t"):$PATH; done
  export PATH
  bash scripts/sign.sh public-key "$out/cosign.pub"
  image_index
fi

# 5. The chart.
helm package "$chart" --version "$V" --app-version "$V" --destination "$out" >/dev/null

# 6. The plugin.
sha=$(bash scripts/package-plugin.sh "$out/kubectl-ownerrefs.tar.gz")
sed -e "s/^    sha256: .*/    sha256: $sha/" -e "s|/releases/download/v[^/]*/|/releases/download/v$V/|" kubectl-plugin/ownerrefs.krew.yaml > "$out/ownerrefs.krew.yaml"

# 7. The npm SBOM, the chart's signature, the sums of every file, and the sums' signature.
if [[ -z $smoke ]]; then
  syft scan --quiet "file:package-lock.json" -o "cyclonedx-json=$out/ownerrefs-agent-$V-npm.cdx.json"
  bash scripts/sign.sh blob "$out/ownerrefs-agent-$V.tgz" "$out/ownerrefs-agent-$V.tgz.sigstore.json"
fi
(cd "$out" && sha256sum -- $(ls | sort) > SHA256SUMS)
[[ -n $smoke ]] || bash scripts/sign.sh blob "$out/SHA256SUMS" "$out/SHA256SUMS.sigstore.json"

rm -rf "$final" && mv "$out" "$final"
log "$final in $((SECONDS - started)) s:"
(cd "$final" && ls -l | awk 'NR > 1 { printf "  %10d  %s\n", $5, $9 }') >&2
