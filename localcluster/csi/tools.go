//go:build tools

// Records csi-sanity as a dependency of this module, so `go mod tidy` keeps it pinned
// in go.mod and go.sum; build.sh builds it from there.
package tools

import _ "github.com/kubernetes-csi/csi-test/v5/cmd/csi-sanity"
