#!/usr/bin/env bash
# Prints the directory holding helm (the chart's tests) and promtool (the alert rules'
# tests), building them from the wrapper modules here (promtool's in prometheus/, its
# dependencies being its own) on a cache miss, like the control plane. Progress goes to stderr.
set -euo pipefail

HELM_VERSION=v4.3.1 # keep in step with go.mod
PROMETHEUS_VERSION=v0.316.0 # keep in step with prometheus/go.mod
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bins=(helm promtool)

# shellcheck source=../cached-build.sh
source "$here/../cached-build.sh"
log() { echo "[tools/build] $*" >&2; }

key=$(cd "$here" && cat go.mod go.sum prometheus/go.mod prometheus/go.sum | sha256sum | cut -c1-12)
cache_root=${OWNERREFS_TOOLS_CACHE:-$HOME/.cache/ownerrefs-tools}
dir=$cache_root/helm-$HELM_VERSION-prometheus-$PROMETHEUS_VERSION-$key

cached_build_begin "$cache_root" "$dir"

start=$SECONDS
log "building helm $HELM_VERSION and promtool $PROMETHEUS_VERSION (cold: about 5 min on 2 cores, plus module downloads on a new machine)"
(cd "$here" && go build -ldflags="-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION" -o "$tmp/" helm.sh/helm/v4/cmd/helm)
(cd "$here/prometheus" && go build -ldflags="-s -w" -o "$tmp/" github.com/prometheus/prometheus/cmd/promtool)
log "built in $((SECONDS - start))s"
cached_build_finish "$dir"
