//go:build tools

// Pins the operator-facing tools the tests use (Helm for the chart, promtool for the alert
// rules) as module dependencies, so `go build` fetches exactly these versions.
package tools

import (
	_ "helm.sh/helm/v4/cmd/helm"
)
