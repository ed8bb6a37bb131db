//go:build kernel

package netfilter

import (
	"context"
	"strings"
	"testing"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/testutil/netnstest"
)

// Check parses and builds a rule without committing it: an existing set passes, a missing
// set or an unknown match fails, and the tables are unchanged either way.
func TestCheckKernel(t *testing.T) {
	for _, mode := range []Mode{ModeNFT, ModeLegacy} {
		t.Run(string(mode), func(t *testing.T) {
			ns := netnstest.New(t)
			ns.MustRun(t, "ipset", "create", "KUBE-IPVS-IPS", "hash:ip")
			t.Cleanup(func() { _, _ = ns.Run("ipset", "destroy") })
			h, err := New(ns.Handle, inet.IPv4, Backend{Mode: mode, Reason: "test"})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			before := ns.MustRun(t, "iptables-"+string(mode)+"-save")
			if err := h.Check(ctx, TableFilter, "-m set --match-set KUBE-IPVS-IPS dst -j RETURN"); err != nil {
				t.Errorf("existing set: %v", err)
			}
			if err := h.Check(ctx, TableFilter, "-m set --match-set NO-SUCH-SET dst -j RETURN"); err == nil {
				t.Error("missing set passed the check")
			}
			if err := h.Check(ctx, TableFilter, "-m nosuchmatch --x -j RETURN"); err == nil {
				t.Error("unknown match passed the check")
			}
			after := ns.MustRun(t, "iptables-"+string(mode)+"-save")
			// The legacy backend instantiates an empty filter table on first use; what must
			// not change is the rules and chains.
			rules := func(s string) string {
				var out []string
				for _, l := range strings.Split(s, "\n") {
					if strings.HasPrefix(l, "-A ") || (strings.HasPrefix(l, ":") && !strings.Contains(l, " ACCEPT ")) {
						out = append(out, l)
					}
				}
				return strings.Join(out, "\n")
			}
			if rules(before) != rules(after) || strings.Contains(after, "KIPVS-PROBE") {
				t.Errorf("Check changed the tables:\n--- before ---\n%s\n--- after ---\n%s", before, after)
			}
		})
	}
}
