package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/kipvs/kipvs/internal/ipvsadm"
)

func main() {
	if err := newRootCommand().Execute(); err != nil && !errors.Is(err, errVersionPrinted) {
		fmt.Fprintln(os.Stderr, "kipvs:", err)
		os.Exit(exitCode(err))
	}
}

// exitCode is, for a malformed `kipvs status` command line, the status ipvsadm exits with
// for the same mistake (255 for an option its parser rejects, 2 for options that conflict or
// make no sense), so scripts written for ipvsadm tell them from a missing service; 1 for
// every other error; 0 after --version.
func exitCode(err error) int {
	if err == nil || errors.Is(err, errVersionPrinted) {
		return 0
	}
	if c, ok := ipvsadm.UsageExitCode(err); ok {
		return c
	}
	return 1
}
