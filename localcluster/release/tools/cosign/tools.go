//go:build tools

// Pins github.com/sigstore/cosign/v3/cmd/cosign as a module dependency, so that `go build` fetches exactly this version.
package tools

import _ "github.com/sigstore/cosign/v3/cmd/cosign"
