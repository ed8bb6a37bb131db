// Package configdiff is the config and flag differential against the real kube-proxy
// v1.34.10 binary: its tests (build tag oracle, run on the host by make test-configdiff)
// run kube-proxy and `kipvs run` with the same configuration file and command line plus
// --write-config-to, and compare the accept or reject decision and every field of the
// written configuration. A difference fails unless e2e/oracle/differences.yaml explains it.
//
// Neither binary gets further than writing the configuration: both exit right after it
// (or after refusing the input), before they touch the kernel.
package configdiff
