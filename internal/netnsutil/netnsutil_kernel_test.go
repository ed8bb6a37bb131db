//go:build kernel

package netnsutil_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/vishvananda/netns"

	"github.com/kipvs/kipvs/internal/netnsutil"
	"github.com/kipvs/kipvs/internal/testutil/netnstest"
)

// A command run through netnsutil.Run lands in the target namespace, and only there.
func TestRunEntersNamespace(t *testing.T) {
	ns := netnstest.New(t)
	cmd := exec.Command("ip", "link", "add", "kipvs-probe", "type", "dummy")
	if err := netnsutil.Run(ns.Handle, cmd); err != nil {
		t.Fatal(err)
	}
	if out := ns.MustRun(t, "ip", "-br", "link", "show"); !strings.Contains(out, "kipvs-probe") {
		t.Fatalf("link not created in %s:\n%s", ns.Name, out)
	}
	if out, _ := exec.Command("ip", "-br", "link", "show").Output(); strings.Contains(string(out), "kipvs-probe") {
		t.Fatalf("link leaked into the test's own namespace:\n%s", out)
	}
}

// Do returns the thread to its original namespace.
func TestDoRestoresNamespace(t *testing.T) {
	ns := netnstest.New(t)
	before, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer before.Close()
	var inside netns.NsHandle
	if err := netnsutil.Do(ns.Handle, func() error {
		var err error
		inside, err = netns.Get()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer inside.Close()
	if !inside.Equal(ns.Handle) {
		t.Fatalf("fn ran in %s, want %s", inside, ns.Handle)
	}
	after, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer after.Close()
	if !after.Equal(before) {
		t.Fatalf("namespace after Do is %s, want %s", after, before)
	}
}
