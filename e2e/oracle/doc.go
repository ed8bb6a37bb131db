// Package oracle holds what kipvs's differential tests against the real kube-proxy v1.34.10
// (built from the nested module e2e/k8s) may find: the deliberate differences, each with its
// reason, in one data file (differences.yaml). The kernel differential (e2e/tests,
// TestDifferentialKubeProxy) and the config and flag differential (e2e/configdiff) fail on
// any difference no entry explains, and docs/differences-from-kube-proxy.md is rendered
// from the same file (go run ./e2e/oracle/cmd/render-differences), so the page cannot say
// something the tests do not check.
package oracle
