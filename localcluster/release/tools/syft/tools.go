//go:build tools

// Pins github.com/anchore/syft/cmd/syft as a module dependency, so that `go build` fetches exactly this version.
package tools

import _ "github.com/anchore/syft/cmd/syft"
