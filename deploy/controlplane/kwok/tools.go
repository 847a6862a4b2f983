//go:build tools

// Package tools names the command this module builds, so that `go mod tidy` keeps its
// dependencies; it is never compiled.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
