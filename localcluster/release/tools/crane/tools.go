//go:build tools

// Pins github.com/google/go-containerregistry/cmd/crane as a module dependency, so that `go build` fetches exactly this version.
package tools

import _ "github.com/google/go-containerregistry/cmd/crane"
