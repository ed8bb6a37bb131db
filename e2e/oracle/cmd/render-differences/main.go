// Command render-differences writes docs/differences-from-kube-proxy.md from
// e2e/oracle/differences.yaml. Run it from the repository root after editing the data file:
//
//	go run ./e2e/oracle/cmd/render-differences
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
