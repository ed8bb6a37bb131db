// Command conformancedoc renders the JUnit reports of `make conformance` (one directory per
// proxy: kube-proxy/, kipvs/, each with run.json and the suite's JUnit file) side by side into
// the generated section of docs/conformance.md, with the reasons in e2e/conformance/notes.yaml.
// It prints the summary and lists tests kipvs did not pass without a recorded reason.
//
//	conformancedoc -results .cache/conformance -doc docs/conformance.md -notes e2e/conformance/notes.yaml
package main
