//go:build tools

// Pins github.com/rhysd/actionlint/cmd/actionlint as a module dependency, so that `go build` fetches exactly this version.
package tools

import _ "github.com/rhysd/actionlint/cmd/actionlint"
