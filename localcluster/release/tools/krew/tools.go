//go:build tools

// Pins sigs.k8s.io/krew/cmd/krew as a module dependency, so that `go build` fetches exactly this version.
package tools

import _ "sigs.k8s.io/krew/cmd/krew"
