// Command kipvs is a drop-in replacement for kube-proxy in IPVS mode.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "kipvs:", err)
		os.Exit(1)
	}
}
