//go:build tools

// Pins promtool (Prometheus' own rule checker and unit tester) for the alert rules' tests.
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
