// Command kipvs is a drop-in replacement for kube-proxy in IPVS mode.
package main

import (
	"fmt"
	"os"

	"github.com/kipvs/kipvs/internal/status"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "kipvs:", err)
		os.Exit(exitCode(err))
	}
}

// exitCode is 2 for a malformed `kipvs status` command line, as ipvsadm exits for one (scripts
// written for ipvsadm tell the cases apart), and 1 for every other error.
func exitCode(err error) int {
	if status.IsUsageError(err) {
		return 2
	}
	return 1
}
