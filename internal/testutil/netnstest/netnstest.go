package netnstest

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/vishvananda/netns"
)

var counter atomic.Int64

// NS is a named network namespace that lives for one test.
type NS struct {
	Name   string
	Handle netns.NsHandle
}

// New creates a fresh named namespace with lo up and removes it when the test ends.
func New(t testing.TB) *NS {
	t.Helper()
	name := fmt.Sprintf("kipvs-t%d", counter.Add(1))
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	h, err := netns.GetFromName(name)
	if err != nil {
		_ = exec.Command("ip", "netns", "del", name).Run()
		t.Fatalf("open netns %s: %v", name, err)
	}
	ns := &NS{Name: name, Handle: h}
	t.Cleanup(func() {
		h.Close()
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	ns.MustRun(t, "ip", "link", "set", "lo", "up")
	return ns
}

// Run runs a command inside the namespace and returns its stdout. Stderr is included in
// the error.
func (ns *NS) Run(args ...string) (string, error) {
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns.Name}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// MustRun is Run that fails the test on error.
func (ns *NS) MustRun(t testing.TB, args ...string) string {
	t.Helper()
	out, err := ns.Run(args...)
	if err != nil {
		t.Fatalf("in netns %s: %v", ns.Name, err)
	}
	return out
}
