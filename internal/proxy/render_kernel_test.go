//go:build kernel

package proxy_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kipvs/kipvs/internal/dataplane/iptables"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipset"
	"github.com/kipvs/kipvs/internal/netfilter"
	"github.com/kipvs/kipvs/internal/proxy"
	"github.com/kipvs/kipvs/internal/testutil/netnstest"
)

// Every rule kipvs can render is accepted by the real kernel, on both iptables backends: for
// each node of the corpus (ruleVariants; the IPv4 and IPv6 rules of one node share a fresh
// namespace, as on a dual-stack node) the rendered ruleset is loaded with the backend's own
// iptables-restore / ip6tables-restore, read back with iptables-save, and the read-back must
// be what kipvs wrote: netfilter's parser (Observe) finds no difference (Diff), every rule
// read back passes the canonical-form check validation runs, and Apply plans nothing. If
// any of that failed, kipvs would either fail every sync or "repair" drift forever.
func TestRenderedRulesLoadKernel(t *testing.T) {
	ctx := context.Background()
	nodes, order := variantsByNode()
	for _, mode := range []netfilter.Mode{netfilter.ModeNFT, netfilter.ModeLegacy} {
		for _, node := range order {
			t.Run(string(mode)+"/"+node, func(t *testing.T) {
				ns := netnstest.New(t)
				dir := t.TempDir()
				var sets strings.Builder
				for _, v := range nodes[node] {
					for _, set := range proxy.AllSets() {
						s := iptables.IPSet(v.Filter.Family, set)
						if s.Type == ipset.BitmapPort {
							fmt.Fprintf(&sets, "create %s %s range 0-65535\n", s.Name, s.Type)
							continue
						}
						fam := "inet"
						if s.Family == inet.IPv6 {
							fam = "inet6"
						}
						fmt.Fprintf(&sets, "create %s %s family %s hashsize 1024 maxelem 65536\n", s.Name, s.Type, fam)
					}
				}
				setsFile := filepath.Join(dir, "sets")
				if err := os.WriteFile(setsFile, []byte(sets.String()), 0o600); err != nil {
					t.Fatal(err)
				}
				ns.MustRun(t, "sh", "-c", "ipset restore < "+setsFile)
				t.Cleanup(func() { _, _ = ns.Run("ipset", "destroy") })

				for _, v := range nodes[node] {
					f := nfFamily(v.Filter.Family)
					tool := "iptables-" + string(mode)
					if f == inet.IPv6 {
						tool = "ip6tables-" + string(mode)
					}
					rs := iptables.Ruleset(v.Filter)
					payload := netfilter.Format(rs)
					file := filepath.Join(dir, "rules-"+f.String())
					if err := os.WriteFile(file, []byte(payload), 0o600); err != nil {
						t.Fatal(err)
					}
					if out, err := ns.Run(tool+"-restore", file); err != nil {
						t.Errorf("%s: the kernel rejects the rendered rules: %v\n%s\n--- payload ---\n%s", v.Name, err, out, payload)
						continue
					}
					// The raw read-back, for failure messages only (each run is slow in the VM).
					saved := func() string {
						out, err := ns.Run(tool + "-save")
						if err != nil {
							return err.Error()
						}
						return out
					}

					h, err := netfilter.New(ns.Handle, f, netfilter.Backend{Mode: mode, Reason: "test"})
					if err != nil {
						t.Fatal(err)
					}
					obs, err := h.Observe(ctx)
					if err != nil {
						t.Errorf("%s: parse the read-back: %v\n--- %s-save ---\n%s", v.Name, err, tool, saved())
						continue
					}
					if d := netfilter.Diff(rs, obs); d != nil {
						t.Errorf("%s: the read-back differs from the rendered rules:\n%s\n--- %s-save ---\n%s",
							v.Name, strings.Join(d, "\n"), tool, saved())
					}
					for table, tr := range obs {
						for _, j := range tr.Jumps {
							if err := netfilter.Canonical(f, j.Rule); err != nil {
								t.Errorf("%s: read-back jump in %s %s: %v", v.Name, table, j.Chain, err)
							}
						}
						for _, c := range tr.Chains {
							for _, r := range c.Rules {
								if err := netfilter.Canonical(f, r); err != nil {
									t.Errorf("%s: read-back rule in %s %s: %v", v.Name, table, c.Name, err)
								}
							}
						}
					}
					res, err := h.Apply(ctx, rs)
					if err != nil {
						t.Errorf("%s: apply over the loaded rules: %v", v.Name, err)
					} else if res.Changed() {
						t.Errorf("%s: apply over the loaded rules wrote tables %v:\n%v", v.Name, res.Restored, res.Payloads)
					}
				}
			})
		}
	}
}
