//go:build kernel

package netfilter

import (
	"context"
	"testing"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/testutil/netnstest"
)

// The real binaries of both backends and families answer --version in the form ParseVersion
// reads, support --random-fully (the VM's iptables is far past 1.6.2, as on any current
// distribution), and pass usable: the test the daemon runs before starting the IPv6 family.
func TestVersionAndUsableKernel(t *testing.T) {
	ctx := context.Background()
	for _, mode := range []Mode{ModeNFT, ModeLegacy} {
		for _, f := range []inet.Family{inet.IPv4, inet.IPv6} {
			t.Run(string(mode)+"/"+f.String(), func(t *testing.T) {
				ns := netnstest.New(t)
				r := NewRunner(ns.Handle)
				v, err := ToolVersion(ctx, r, f, mode)
				if err != nil {
					t.Fatal(err)
				}
				if !v.AtLeast(RandomFullyMinVersion) {
					t.Errorf("%s-%s is %s: older than %s", tool(f), mode, v, RandomFullyMinVersion)
				}
				if err := usable(ctx, r, f, mode); err != nil {
					t.Errorf("Usable: %v", err)
				}
				t.Logf("%s-%s %s", tool(f), mode, v)
			})
		}
	}
}
