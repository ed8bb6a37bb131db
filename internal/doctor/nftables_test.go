package doctor

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"sigs.k8s.io/knftables"

	"github.com/kipvs/kipvs/internal/config"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipset"
	"github.com/kipvs/kipvs/internal/netfilter/netfiltertest"
	"github.com/kipvs/kipvs/internal/nft"
)

// A healthy node running the nftables backend: its own checks are there and OK, and none of
// the iptables backend's (ipset modules, drift of ipsets and iptables chains) is run.
func TestHealthyNFTablesNode(t *testing.T) {
	f := newFixture(t, fixtureOpts{nft: true})
	rep := f.run()
	checkReport(t, rep, []expect{
		{check: "filter backend", status: OK, finding: []string{"nftables", "the kipvs daemon on 127.0.0.1:10249 runs it"}},
		{check: "module ip_vs", status: OK},
		{check: "module nf_tables", status: OK},
		{check: "module nft_chain_nat", status: OK},
		{check: "module nft_fib_ipv4", status: OK},
		{check: "module nft_ct", status: OK},
		{check: "module nft_masq", status: OK},
		{check: "module nft_reject_ipv4", status: OK},
		{check: "module nf_conntrack", status: OK},
		{check: "nft program", status: OK, finding: []string{"nft 1.0.6"}},
		{check: "kernel release", status: OK, finding: []string{"6.1.0-56-amd64 is 5.6 or later"}},
		{check: "table ip kipvs", status: OK, finding: []string{"17 chains", "6 base chains"}},
		{check: "filter backend leftovers", status: OK, finding: []string{"no KUBE-* ipset or chain"}},
		{check: "FORWARD policy", status: OK, finding: []string{"policy ACCEPT", "table ip kipvs"}},
		{check: "daemon", status: OK},
		{check: "drift: nftables sets", status: OK, finding: []string{"17 sets hold exactly the 3 members"}},
		{check: "drift: nftables chains", status: OK},
		{check: "drift: kube-ipvs0", status: OK},
		{check: "drift: virtual servers", status: OK},
	})
	for _, absent := range []string{"module ip_set", "module xt_set", "module ip_set_hash_ipport", "drift: ipsets", "drift: iptables", "table ip6 kipvs", "module nft_fib_ipv6"} {
		if got := rep.Find(absent); len(got) != 0 {
			t.Errorf("check %q on an nftables node: %+v", absent, got)
		}
	}
	if rep.Failed() || rep.Count(Warn) != 0 {
		t.Errorf("healthy nftables node: %d FAIL, %d WARN", rep.Count(Fail), rep.Count(Warn))
	}
}

// The iptables backend's node has none of the nftables backend's checks but its leftovers.
func TestIPTablesNodeHasNoNFTablesChecks(t *testing.T) {
	rep := newFixture(t, fixtureOpts{}).run()
	checkReport(t, rep, []expect{
		{check: "filter backend", status: OK, finding: []string{"iptables: the kipvs daemon"}},
		{check: "filter backend leftovers", status: OK, finding: []string{"no table ip kipvs or ip6 kipvs"}},
	})
	for _, absent := range []string{"module nf_tables", "nft program", "kernel release", "table ip kipvs", "drift: nftables sets", "drift: nftables chains"} {
		if got := rep.Find(absent); len(got) != 0 {
			t.Errorf("check %q on an iptables node: %+v", absent, got)
		}
	}
}

// deleteChain removes chain name (and its rules) from the fixture's IPv4 table.
func deleteChain(f *fixture, name string) {
	f.nftRun(inet.IPv4, func(tx *knftables.Transaction) {
		tx.Flush(&knftables.Chain{Name: name})
		tx.Delete(&knftables.Chain{Name: name})
	})
}

func TestBrokenNFTablesNode(t *testing.T) {
	notSyncedFix := []string{"--kipvs-filter-backend=nftables"}
	cases := []struct {
		name string
		// iptables runs the fixture with the iptables backend.
		iptables bool
		breaK    func(f *fixture)
		want     []expect
	}{
		{
			name:  "nft not installed",
			breaK: func(f *fixture) { f.noNFT = true },
			want: []expect{
				{check: "nft program", status: Fail, finding: []string{"nft is not installed"}, fix: []string{"install nftables 1.0.1 or later"}},
				{check: "table ip kipvs", status: Warn, finding: []string{"cannot read table ip kipvs", "not found"}, fix: []string{"install nftables"}},
				{check: "drift: nftables sets", status: Warn, finding: []string{"set ip kipvs cluster-ip: exec: \"nft\""}},
				{check: "drift: nftables chains", status: Warn, finding: []string{"cannot read kipvs's chains"}},
			},
		},
		{
			name:  "nft older than 1.0.1",
			breaK: func(f *fixture) { f.nftVersion = "nftables v1.0.0 (Fearless Fosdick #2)\n" },
			want: []expect{{check: "nft program", status: Fail, finding: []string{"nft is 1.0.0, older than 1.0.1"},
				fix: []string{"install nftables 1.0.1 or later"}}},
		},
		{
			name:  "nft version unreadable",
			breaK: func(f *fixture) { f.nftVersion = "nftables\n" },
			want:  []expect{{check: "nft program", status: Warn, finding: []string{"cannot read nft's version"}, fix: []string{"nftables v1.0.1 or later"}}},
		},
		{
			name:  "nft --version fails",
			breaK: func(f *fixture) { f.nftErr = errBoom() },
			want:  []expect{{check: "nft program", status: Fail, finding: []string{"nft --version fails (boom)"}, fix: []string{"install nftables"}}},
		},
		{
			name:  "nft 1.1",
			breaK: func(f *fixture) { f.nftVersion = "nftables v1.1.1 (Commodore Bullmoose #2)\n" },
			want:  []expect{{check: "nft program", status: OK, finding: []string{"nft 1.1.1"}}},
		},
		{
			name:  "kernel older than 5.6",
			breaK: func(f *fixture) { f.release = "5.4.0-150-generic" },
			want: []expect{
				{check: "kernel release", status: Fail, finding: []string{"kernel 5.4.0-150-generic is older than 5.6", "load-balancer-source-cidr"},
					fix: []string{"5.6 or later", "--kipvs-filter-backend=iptables"}},
				{check: "sysctl net.ipv4.vs.conn_reuse_mode", status: Warn},
			},
		},
		{
			name:  "kernel 5.10",
			breaK: func(f *fixture) { f.release = "5.10.0-30-amd64" },
			want:  []expect{{check: "kernel release", status: OK, finding: []string{"5.10.0-30-amd64 is 5.6 or later"}}},
		},
		{
			name:  "fib module missing",
			breaK: func(f *fixture) { f.mods["nft_fib_ipv4"] = ModuleMissing },
			want: []expect{{check: "module nft_fib_ipv4", status: Fail, finding: []string{"not installed for kernel 6.1.0-56-amd64", "fib daddr type local"},
				fix: []string{"modprobe nft_fib_ipv4"}}},
		},
		{
			name:  "masq module presence unknown",
			breaK: func(f *fixture) { f.mods["nft_masq"] = ModuleUnknown },
			want:  []expect{{check: "module nft_masq", status: Warn, finding: []string{"/lib/modules"}, fix: []string{"modprobe nft_masq"}}},
		},
		{
			name:  "nf_tables installed, not loaded",
			breaK: func(f *fixture) { f.mods["nf_tables"] = ModuleAvailable },
			want:  []expect{{check: "module nf_tables", status: OK, finding: []string{"loads it on first use"}}},
		},
		{
			// No daemon: the node tells the backend (its table, no KUBE-* ipset); the node
			// runs IPv6 too, whose table kipvs has not created yet.
			name: "IPv6 without a daemon",
			breaK: func(f *fixture) {
				f.daemon.err = ErrNoDaemon
				f.nftIPv6 = func() error { return nil }
			},
			want: []expect{
				{check: "daemon", status: Warn},
				{check: "filter backend", status: OK, finding: []string{"nftables: no kipvs daemon says which it runs; the node holds table ip kipvs and no KUBE-* ipset"}},
				{check: "module nft_fib_ipv6", status: OK},
				{check: "module nft_reject_ipv6", status: OK},
				{check: "table ip kipvs", status: OK},
				{check: "table ip6 kipvs", status: Warn, finding: []string{"table ip6 kipvs does not exist: kipvs creates it at its first sync"}, fix: notSyncedFix},
				{check: "FORWARD policy (IPv6)", status: OK, finding: []string{"ip6tables is not installed"}},
				{check: "local traffic detector (IPv6)", status: OK},
				{check: "sysctl net.bridge.bridge-nf-call-ip6tables", status: OK},
			},
		},
		{
			name: "table deleted behind a synced daemon",
			breaK: func(f *fixture) {
				f.nftRun(inet.IPv4, func(tx *knftables.Transaction) { tx.Delete(&knftables.Table{}) })
			},
			want: []expect{
				{check: "table ip kipvs", status: Fail, finding: []string{"table ip kipvs does not exist, though the kipvs daemon has synced IPv4", "neither masqueraded nor filtered"},
					fix: []string{"restores it at its next full sync (every ipvs.syncPeriod, 30s)", "nft flush ruleset"}},
				{check: "drift: nftables sets", status: Warn, finding: []string{"set ip kipvs cluster-ip is missing"}},
				{check: "drift: nftables chains", status: Warn, finding: []string{"missing [chain filter-forward]"}},
			},
		},
		{
			name:  "base chain deleted behind a synced daemon",
			breaK: func(f *fixture) { deleteChain(f, "filter-output") },
			want: []expect{
				{check: "table ip kipvs", status: Fail, finding: []string{"chain filter-output is missing"}, fix: []string{"its next full sync"}},
				{check: "drift: nftables chains", status: Warn, finding: []string{"missing [chain filter-output], [filter-output: type filter hook output priority filter]"}},
			},
		},
		{
			name: "chain deleted before the daemon's first sync",
			breaK: func(f *fixture) {
				deleteChain(f, "filter-output")
				f.state.Families[0].Synced = false
			},
			want: []expect{
				{check: "table ip kipvs", status: Warn, finding: []string{"chain filter-output is missing"}, fix: notSyncedFix},
				{check: "daemon", status: Warn, finding: []string{"has not synced IPv4"}},
				{check: "filter backend leftovers", status: OK},
			},
		},
		{
			name: "a chain re-hooked",
			breaK: func(f *fixture) {
				f.nftRead = map[inet.Family]NFTReader{inet.IPv4: rehooked{NFTReader: NewNFTReader(f.nft[inet.IPv4]), chain: "nat-output", base: "type nat hook output priority dstnat"}}
			},
			want: []expect{{check: "table ip kipvs", status: Fail,
				finding: []string{`chain nat-output is hooked "type nat hook output priority dstnat", kipvs declares "type nat hook output priority -100"`}}},
		},
		{
			name: "table unreadable",
			breaK: func(f *fixture) {
				f.nftRead = map[inet.Family]NFTReader{inet.IPv4: brokenNFT{name: "ip kipvs", err: errBoom()}}
			},
			want: []expect{
				{check: "table ip kipvs", status: Warn, finding: []string{"cannot read table ip kipvs: boom"}, fix: []string{"nft list table ip kipvs"}},
				{check: "drift: nftables sets", status: Warn, finding: []string{"set ip kipvs cluster-ip: boom"}},
				{check: "drift: nftables chains", status: Warn, finding: []string{"cannot read kipvs's chains: boom"}},
			},
		},
		{
			name: "set member removed behind kipvs's back",
			breaK: func(f *fixture) {
				f.nftRun(inet.IPv4, func(tx *knftables.Transaction) {
					tx.Delete(&knftables.Element{Set: "cluster-ip", Key: []string{"10.96.0.10", "tcp", "80"}})
				})
			},
			want: []expect{{check: "drift: nftables sets", status: Warn, finding: []string{"ip kipvs cluster-ip lacks 10.96.0.10 . tcp . 80"}, fix: []string{"next full sync"}}},
		},
		{
			name: "set member added behind kipvs's back",
			breaK: func(f *fixture) {
				f.nftRun(inet.IPv4, func(tx *knftables.Transaction) {
					tx.Add(&knftables.Element{Set: "ipvs-ips", Key: []string{"10.96.0.99"}})
				})
			},
			want: []expect{{check: "drift: nftables sets", status: Warn, finding: []string{"ip kipvs ipvs-ips has unwanted 10.96.0.99"}}},
		},
		{
			name: "set deleted",
			breaK: func(f *fixture) {
				f.nftRun(inet.IPv4, func(tx *knftables.Transaction) { tx.Delete(&knftables.Set{Name: "load-balancer-source-cidr"}) })
			},
			want: []expect{{check: "drift: nftables sets", status: Warn, finding: []string{"set ip kipvs load-balancer-source-cidr is missing"}}},
		},
		{
			name: "a rule flushed",
			breaK: func(f *fixture) {
				f.nftRun(inet.IPv4, func(tx *knftables.Transaction) { tx.Flush(&knftables.Chain{Name: "mark-for-masquerade"}) })
			},
			want: []expect{{check: "drift: nftables chains", status: Warn, finding: []string{"missing [mark-for-masquerade: meta mark set meta mark | 0x00004000]"}}},
		},
		{
			name: "a rule added",
			breaK: func(f *fixture) {
				f.nftRun(inet.IPv4, func(tx *knftables.Transaction) {
					tx.Add(&knftables.Rule{Chain: "services", Rule: "ip daddr 10.96.0.99 drop"})
				})
			},
			want: []expect{{check: "drift: nftables chains", status: Warn, finding: []string{"unwanted [services: ip daddr 10.96.0.99 drop]"}}},
		},
		{
			name:  "no local traffic detector",
			breaK: func(f *fixture) { f.cfg.ClusterCIDRs = nil },
			want: []expect{
				{check: "local traffic detector", status: Warn, finding: []string{"table ip kipvs chain services: ip saddr . meta l4proto . th dport @cluster-ip jump mark-for-masquerade"}},
				{check: "cluster CIDR", status: OK},
			},
		},
		{
			// kipvs's accept in its own table does not end iptables' FORWARD chain.
			name:  "iptables FORWARD policy DROP",
			breaK: func(f *fixture) { f.ipt.forwardPol = "DROP" },
			want: []expect{{check: "FORWARD policy", status: Fail, finding: []string{"iptables filter FORWARD policy is DROP", "an accept in table ip kipvs does not end the iptables FORWARD chain"},
				fix: []string{"iptables -P FORWARD ACCEPT"}}},
		},
		{
			name:  "an unconditional DROP in FORWARD",
			breaK: func(f *fixture) { f.restore("*filter\n-I FORWARD 1 -j DROP\nCOMMIT\n") },
			want:  []expect{{check: "FORWARD policy", status: Fail, finding: []string{`"-A FORWARD -j DROP"`}, fix: []string{"iptables -D FORWARD -j DROP"}}},
		},
		{
			name:  "FORWARD DROP on the other iptables backend",
			breaK: func(f *fixture) { f.other = &fakeIptables{nf: netfiltertest.NewFake(inet.IPv4), forwardPol: "DROP"} },
			want: []expect{{check: "FORWARD policy", status: Fail, finding: []string{"iptables-legacy filter FORWARD policy is DROP"},
				fix: []string{"iptables-legacy -P FORWARD ACCEPT"}}},
		},
		{
			name:  "iptables not installed",
			breaK: func(f *fixture) { f.noIptables = true },
			want:  []expect{{check: "FORWARD policy", status: OK, finding: []string{"iptables is not installed"}}},
		},
		{
			name:  "iptables-save fails",
			breaK: func(f *fixture) { f.ipt.err = errBoom() },
			want: []expect{
				{check: "FORWARD policy", status: Warn, finding: []string{"iptables-save failed: boom"}, fix: []string{"iptables-save"}},
				{check: "filter backend leftovers", status: Warn, finding: []string{"cannot look for the iptables backend's KUBE-* chains: iptables: boom"}},
			},
		},
		{
			name:  "KUBE-* ipsets left on an nftables node",
			breaK: func(f *fixture) { createIPSet(f, "KUBE-CLUSTER-IP") },
			want: []expect{{check: "filter backend leftovers", status: Warn,
				finding: []string{"KUBE-* ipsets KUBE-CLUSTER-IP are left from the iptables backend or kube-proxy's IPVS mode", "they only hold stale members"},
				fix:     []string{"restart kipvs", "kube-proxy or a kipvs with --kipvs-filter-backend=iptables still runs", "kipvs cleanup"}}},
		},
		{
			name: "KUBE-* chains left without ipsets",
			breaK: func(f *fixture) {
				f.restore("*nat\n:KUBE-SERVICES - [0:0]\n:KUBE-MARK-MASQ - [0:0]\n-A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\nCOMMIT\n")
			},
			want: []expect{{check: "filter backend leftovers", status: Warn, finding: []string{"KUBE-* chains (iptables KUBE-MARK-MASQ, KUBE-SERVICES)", "their rules still see every packet"},
				fix: []string{"with kipvs stopped, kipvs cleanup", "only when KUBE-* ipsets are left"}}},
		},
		{
			name: "KUBE-* ipsets left while the daemon's first sync is pending",
			breaK: func(f *fixture) {
				createIPSet(f, "KUBE-LOOP-BACK")
				f.state.Families[0].Synced = false
			},
			want: []expect{
				{check: "filter backend leftovers", status: Warn, finding: []string{"KUBE-LOOP-BACK", "removes them after its first sync, which is pending"}},
				{check: "daemon", status: Warn},
			},
		},
		{
			name:  "ipsets cannot be listed",
			breaK: func(f *fixture) { f.ipsetNames = brokenIPSetNames{f.ipset} },
			want: []expect{{check: "filter backend leftovers", status: Warn, finding: []string{"cannot look for the iptables backend's KUBE-* ipsets: list ipsets: boom"},
				fix: []string{"ipset list -n"}}},
		},
		{
			// Without ip_set in the kernel there is no ipset to list.
			name: "ip_set not loaded",
			breaK: func(f *fixture) {
				f.mods["ip_set"] = ModuleAvailable
				f.ipsetNames = brokenIPSetNames{f.ipset}
			},
			want: []expect{{check: "filter backend leftovers", status: OK}},
		},
		{
			name:     "table ip kipvs left on an iptables node",
			iptables: true,
			breaK: func(f *fixture) {
				f.nftRun(inet.IPv4, func(tx *knftables.Transaction) { tx.Add(&knftables.Table{}) })
			},
			want: []expect{{check: "filter backend leftovers", status: Warn, finding: []string{"table ip kipvs of the nftables backend is left on a node that runs the iptables backend"},
				fix: []string{"restart kipvs", "deletes tables ip kipvs and ip6 kipvs after its first sync", "kipvs cleanup"}}},
		},
		{
			name:     "both tables left on an iptables node",
			iptables: true,
			breaK: func(f *fixture) {
				for _, fam := range []inet.Family{inet.IPv4, inet.IPv6} {
					f.nftRun(fam, func(tx *knftables.Transaction) { tx.Add(&knftables.Table{}) })
				}
			},
			want: []expect{{check: "filter backend leftovers", status: Warn, finding: []string{"tables ip kipvs and ip6 kipvs of the nftables backend are left"}}},
		},
		{
			name:     "tables unreadable on an iptables node",
			iptables: true,
			breaK: func(f *fixture) {
				f.nftRead = map[inet.Family]NFTReader{inet.IPv6: brokenNFT{name: "ip6 kipvs", err: errBoom()}}
			},
			want: []expect{{check: "filter backend leftovers", status: Warn, finding: []string{"cannot look for the nftables backend's tables: boom"}}},
		},
		{
			name:     "nft not installed on an iptables node",
			iptables: true,
			breaK:    func(f *fixture) { f.noNFT = true },
			want:     []expect{{check: "filter backend leftovers", status: OK, finding: []string{"nft is not installed"}}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{nft: !tc.iptables})
			tc.breaK(f)
			checkReport(t, f.run(), tc.want)
		})
	}
}

// createIPSet creates an empty ipset of the iptables backend on the fixture's node.
func createIPSet(f *fixture, name string) {
	f.t.Helper()
	if err := f.ipset.Create(ipset.Set{Name: name, Type: ipset.Type("hash:ip,port")}); err != nil {
		f.t.Fatal(err)
	}
}

// How doctor knows the backend when the daemon does not say: the node, else its flag.
func TestFilterBackendDetection(t *testing.T) {
	cases := []struct {
		name     string
		iptables bool
		flag     config.FilterBackend
		breaK    func(f *fixture)
		want     config.FilterBackend
		finding  string
	}{
		{name: "an older daemon on an nftables node", breaK: func(f *fixture) { f.state.FilterBackend = "" },
			want: config.FilterNFTables, finding: "it predates the state document's filterBackend); the node holds table ip kipvs and no KUBE-* ipset"},
		{name: "no daemon on an iptables node", iptables: true, flag: config.FilterNFTables, breaK: func(f *fixture) { f.daemon.err = ErrNoDaemon },
			want: config.FilterIPTables, finding: "the node holds KUBE-* ipsets (KUBE-CLUSTER-IP, KUBE-EXTERNAL-IP and 15 more) and no kipvs nftables table (doctor runs with --kipvs-filter-backend=nftables; the checks below follow the node)"},
		{name: "no daemon, both backends' objects", flag: config.FilterNFTables, breaK: func(f *fixture) {
			f.daemon.err = ErrNoDaemon
			createIPSet(f, "KUBE-CLUSTER-IP")
		}, want: config.FilterNFTables, finding: "the node holds both table ip kipvs and KUBE-* ipsets"},
		{name: "no daemon, a clean node", flag: config.FilterNFTables, breaK: func(f *fixture) {
			f.daemon.err = ErrNoDaemon
			f.nftRun(inet.IPv4, func(tx *knftables.Transaction) { tx.Delete(&knftables.Table{}) })
		}, want: config.FilterNFTables, finding: "the node holds neither a kipvs nftables table nor KUBE-* ipsets: doctor's --kipvs-filter-backend decides"},
		{name: "the daemon's word wins over doctor's flag", iptables: true, flag: config.FilterNFTables, breaK: func(*fixture) {},
			want: config.FilterIPTables, finding: "iptables: the kipvs daemon on 127.0.0.1:10249 runs it (doctor runs with --kipvs-filter-backend=nftables"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{nft: !tc.iptables})
			tc.breaK(f)
			if tc.flag != "" {
				f.cfg.Kipvs.FilterBackend = tc.flag
			}
			rep := f.run()
			got := rep.Find("filter backend")
			if len(got) != 1 || got[0].Status != OK || !strings.HasPrefix(got[0].Finding, string(tc.want)+": ") || !strings.Contains(got[0].Finding, tc.finding) {
				t.Errorf("filter backend: %+v, want %s with %q", got, tc.want, tc.finding)
			}
			// The checks follow the backend found.
			nftChecks := len(rep.Find("nft program")) == 1
			if nftChecks != (tc.want == config.FilterNFTables) {
				t.Errorf("backend %s, nftables checks run: %v", tc.want, nftChecks)
			}
		})
	}
}

// The table reader reads the nftables dataplane's notation: members as the state document
// writes them, chains as its rules text.
func TestNFTReader(t *testing.T) {
	f := newFixture(t, fixtureOpts{nft: true})
	r := NewNFTReader(f.nft[inet.IPv4])
	ctx := context.Background()
	if r.Name() != "ip kipvs" {
		t.Errorf("Name = %q", r.Name())
	}
	members, err := r.Members(ctx, "cluster-ip")
	if err != nil || fmt.Sprint(members) != "[10.96.0.10 . tcp . 80]" {
		t.Errorf("Members(cluster-ip) = %q, %v", members, err)
	}
	rules, err := r.Rules(ctx)
	if err != nil || rules != f.state.Families[0].Rules {
		t.Errorf("Rules (%v):\n%s\nwant the state document's:\n%s", err, rules, f.state.Families[0].Rules)
	}
	empty := NewNFTReader(f.nft[inet.IPv6])
	if _, err := empty.Chains(ctx); err == nil {
		t.Error("Chains of a table that does not exist: no error")
	}
	if rules, err := empty.Rules(ctx); err != nil || rules != "" {
		t.Errorf("Rules of a table that does not exist = %q, %v", rules, err)
	}
}

// chainLines keys an nftables rules text by chain, the base chain's hook included.
func TestChainLines(t *testing.T) {
	text := "chain forward\n\t\tct state established,related accept\nchain nat-output\n\ttype nat hook output priority -100\n\t\tjump services\n"
	want := "[chain forward] [forward: ct state established,related accept] [chain nat-output] [nat-output: type nat hook output priority -100] [nat-output: jump services]"
	if got := strings.Join(quoteAll(chainLines(text)), " "); got != want {
		t.Errorf("chainLines:\n%s\nwant\n%s", got, want)
	}
}

// rehooked is a table reader whose chain shows another hook.
type rehooked struct {
	NFTReader
	chain, base string
}

func (r rehooked) Chains(ctx context.Context) ([]nft.Chain, error) {
	chains, err := r.NFTReader.Chains(ctx)
	for i := range chains {
		if chains[i].Name == r.chain {
			chains[i].Base = r.base
		}
	}
	return chains, err
}
