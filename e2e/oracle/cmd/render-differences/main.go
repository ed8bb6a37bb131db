package main

import (
	"fmt"
	"os"

	"github.com/kipvs/kipvs/e2e/oracle"
)

// Page is the rendered page, relative to the repository root.
const Page = "docs/differences-from-kube-proxy.md"

func main() {
	ds, err := oracle.Load()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := os.WriteFile(Page, []byte(ds.Render()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
