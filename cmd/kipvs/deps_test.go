package main

import (
	"os/exec"
	"strings"
	"testing"
)

// allowedTestDeps are dependencies of the binary that testMachinery flags, with why each
// one stays.
var allowedTestDeps = map[string]string{
	// client-go's typed clients are built on k8s.io/client-go/gentype, whose fake.go (the
	// base of the generated fake clientsets) imports client-go/testing, which imports
	// testrestmapper. Every typed client therefore pulls them in; the linker drops the
	// unused code.
	"k8s.io/client-go/testing":                        "imported by k8s.io/client-go/gentype",
	"k8s.io/apimachinery/pkg/api/meta/testrestmapper": "imported by k8s.io/client-go/testing",
	// github.com/google/nftables's Conn takes a test dialer option (WithTestDial, of
	// nltest's type), so its package imports nltest; kipvs never sets it.
	"github.com/mdlayher/netlink/nltest": "imported by github.com/google/nftables",
	// Ends in "test" only because it is "latest".
	"k8s.io/client-go/tools/clientcmd/api/latest": "not test machinery",
}

// testMachinery reports whether a non-standard package's import path names test support:
// an element that ends in "test" or "testing" (ipvstest, zaptest/observer, client-go/testing)
// or starts with "test" (testrestmapper), "fake" anywhere, or kipvs's fault injector.
func testMachinery(path string) bool {
	if strings.Contains(path, "fake") || strings.HasSuffix(path, "/internal/faulty") {
		return true
	}
	for elem := range strings.SplitSeq(path, "/") {
		if strings.HasSuffix(elem, "test") || strings.HasSuffix(elem, "testing") || strings.HasPrefix(elem, "test") {
			return true
		}
	}
	return false
}

// TestNoTestMachineryInBinary keeps fakes, fault injection and other test support out of
// the kipvs binary: they live in test-support packages (internal/<adapter>/<adapter>test)
// that only tests import. Standard-library packages are not checked (os imports
// internal/testlog, sync internal/synctest).
func TestNoTestMachineryInBinary(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("go tool not found on PATH (%v): cannot list the binary's dependencies", err)
	}
	out, err := exec.Command(gobin, "list", "-deps", "-f", "{{.ImportPath}} {{.Standard}}", ".").Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list -deps: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list -deps: %v", err)
	}
	n := 0
	for line := range strings.Lines(string(out)) {
		path, std, _ := strings.Cut(strings.TrimSpace(line), " ")
		n++
		if std == "true" || !testMachinery(path) {
			continue
		}
		if _, ok := allowedTestDeps[path]; ok {
			continue
		}
		t.Errorf("kipvs depends on test machinery %s", path)
	}
	if n < 50 {
		t.Fatalf("go list -deps listed only %d packages:\n%s", n, out)
	}
}
