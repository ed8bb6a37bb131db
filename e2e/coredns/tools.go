//go:build tools

// Package coredns pins the main package of the binary built from this module (make image-coredns).
package coredns

import (
	_ "github.com/coredns/coredns"
)
