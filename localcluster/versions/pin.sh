#!/usr/bin/env bash
# Makes (or remakes) the pinned wrapper module of one Kubernetes release under
# localcluster/versions/<minor>/: a go.mod requiring k8s.io/kubernetes at that version, with
# each of its staging modules (the `./staging/src/...` replaces of its own go.mod) pinned to the
# matching v0 release, then `go mod tidy` for go.sum. build.sh builds from it.
#
#   bash localcluster/versions/pin.sh v1.31.14
set -euo pipefail
version=${1:?usage: pin.sh vMAJOR.MINOR.PATCH}
[[ $version =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] || { echo "pin.sh: $version is not v1.MINOR.PATCH" >&2; exit 2; }
minor=${BASH_REMATCH[1]}
patch=${BASH_REMATCH[2]}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dir=$here/1.$minor
mkdir -p "$dir"
upstream=$(cd "$dir" && go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
{
  echo "// Wrapper module: the control plane and kubelet of Kubernetes $version, from k8s.io/kubernetes (pin.sh)."
  echo "module ownerrefs.dev/localcluster/k8s1$minor"
  echo
  echo "go 1.26.0"
  echo
  echo "require k8s.io/kubernetes $version"
  echo
  sed -n 's#^[[:space:]]*\(k8s\.io/[a-z0-9-]*\) => \./staging/src/.*#\1#p' "$upstream" | sort -u | while read -r m; do
    echo "replace $m => $m v0.$minor.$patch"
    echo
  done
} > "$dir/go.mod"
cat > "$dir/tools.go" <<'GO'
//go:build tools

// The commands built from this module (localcluster/versions/build.sh).
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
GO
(cd "$dir" && go mod tidy)
echo "$dir"
