// Package conformance reads the JUnit reports of upstream's e2e suite (e2e.test v1.34.10) run
// against kube-proxy and kipvs on the real node (e2e/node, `make conformance`), and renders
// them side by side into docs/conformance.md with the reason for every test kipvs does not
// pass (notes.yaml).
package conformance
