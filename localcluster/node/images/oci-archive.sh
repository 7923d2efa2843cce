#!/usr/bin/env bash
# oci-archive.sh OUT.tar NAME ROOTFS_DIR ENTRYPOINT_JSON
# Writes a one-layer OCI image archive of ROOTFS_DIR (what `ctr images import` takes),
# named NAME (io.containerd.image.name), with the given entrypoint. The layer is an
# uncompressed tar with fixed owners and times, so the same input gives the same digest.
set -euo pipefail
out=$1 name=$2 rootfs=$3 entrypoint=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/blobs/sha256"
blob() { # file -> prints "digest size", moves it into blobs/
  local d s; d=$(sha256sum "$1" | cut -d' ' -f1); s=$(stat -c %s "$1")
  mv "$1" "$work/blobs/sha256/$d"; echo "$d $s"
}
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$rootfs" -cf "$work/layer" .
read -r layer layer_size < <(blob "$work/layer")
printf '{"architecture":"amd64","os":"linux","config":{"Entrypoint":%s,"Env":["PATH=/bin"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
  "$entrypoint" "$layer" > "$work/config"
read -r config config_size < <(blob "$work/config")
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' \
  "$config" "$config_size" "$layer" "$layer_size" > "$work/manifest"
read -r manifest manifest_size < <(blob "$work/manifest")
printf '{"imageLayoutVersion":"1.0.0"}' > "$work/oci-layout"
printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
  "$manifest" "$manifest_size" "$name" "${name##*:}" > "$work/index.json"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$work" -cf "$out" oci-layout index.json blobs
