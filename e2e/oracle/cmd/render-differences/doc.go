// Command render-differences writes docs/differences-from-kube-proxy.md from
// e2e/oracle/differences.yaml. Run it from the repository root after editing the data file:
//
//	go run ./e2e/oracle/cmd/render-differences
package main
