//go:build tools

// Pins github.com/containers/skopeo/cmd/skopeo as a module dependency, so that `go build` fetches exactly this version.
package tools

import _ "github.com/containers/skopeo/cmd/skopeo"
