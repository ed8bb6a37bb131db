package netfilter

// The scenario every implementation runs: the fake in `go test`, the real handle in the VM
// (netfilter_kernel_test.go) for both backends and both families. It compares Dump, and the whole
// tables as iptables-save prints them (foreign chains and rules included), with the same golden
// files, so the fake is held to the kernel's behaviour.

import (
	"context"
	"errors"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvsmode"
	"github.com/kipvs/kipvs/internal/kerr"
	"github.com/kipvs/kipvs/internal/testutil/golden"
)

// scenarioEnv is one implementation under test plus an independent writer and reader of the
// same tables: another program running iptables-restore, and iptables-save.
type scenarioEnv struct {
	nf Interface
	// foreign applies an iptables-restore --noflush payload as another program would.
	foreign func(t *testing.T, payload string)
	// saveAll returns what iptables-save prints for the filter and then the nat table, without
	// comment lines and with zero chain counters.
	saveAll func(t *testing.T) string
}

// fam holds the per-family spellings used by the rulesets.
type fam struct {
	set      func(name string) string // ipset name: KUBE-X or KUBE-6-X
	podCIDR  string
	loopback string
	vip      string
	reject   string
}

func famOf(f inet.Family) fam {
	if f == inet.IPv6 {
		return fam{
			set:     func(n string) string { return strings.Replace(n, "KUBE-", "KUBE-6-", 1) },
			podCIDR: "fd00:10:244::/64", loopback: "::1/128", vip: "fd00:10:96::1", reject: "icmp6-port-unreachable",
		}
	}
	return fam{
		set:     func(n string) string { return n },
		podCIDR: "10.244.0.0/16", loopback: "127.0.0.0/8", vip: "10.96.0.1", reject: "icmp-port-unreachable",
	}
}

// scenarioSets are the ipsets the rulesets match against, with their types (the kernel test
// creates them first; the fake checks against the same list).
var scenarioSets = map[string]string{
	"KUBE-CLUSTER-IP":             "hash:ip,port",
	"KUBE-LOAD-BALANCER":          "hash:ip,port",
	"KUBE-EXTERNAL-IP":            "hash:ip,port",
	"KUBE-LOOP-BACK":              "hash:ip,port,ip",
	"KUBE-IPVS-IPS":               "hash:ip",
	"KUBE-NODE-PORT-TCP":          "bitmap:port",
	"KUBE-HEALTH-CHECK-NODE-PORT": "bitmap:port",
}

// rulesetV1 is a representative upstream IPVS-mode ruleset.
func rulesetV1(f inet.Family) Ruleset {
	p := famOf(f)
	match := func(set, dims string) string { return "-m set --match-set " + p.set(set) + " " + dims }
	return Ruleset{
		TableNAT: {
			Chains: []Chain{
				{Name: ipvsmode.ChainServices, Rules: []string{
					"-s " + p.loopback + " -j RETURN",
					"-m comment --comment " + Quote("Kubernetes service load balancer ip + port for load balancer with sourceRange") + " " + match("KUBE-LOAD-BALANCER", "dst,dst") + " -j KUBE-LOAD-BALANCER",
					"! -s " + p.podCIDR + " -m comment --comment " + Quote("Kubernetes service cluster ip + port for masquerade purpose") + " " + match("KUBE-CLUSTER-IP", "dst,dst") + " -j KUBE-MARK-MASQ",
					"-m addrtype --dst-type LOCAL -j KUBE-NODE-PORT",
					match("KUBE-CLUSTER-IP", "dst,dst") + " -j ACCEPT",
					match("KUBE-LOAD-BALANCER", "dst,dst") + " -j ACCEPT",
				}},
				{Name: ipvsmode.ChainLoadBalancer, Rules: []string{"-j KUBE-MARK-MASQ"}},
				{Name: ipvsmode.ChainNodePort, Rules: []string{
					"-p tcp -m comment --comment " + Quote("Kubernetes nodeport TCP port for masquerade purpose") + " " + match("KUBE-NODE-PORT-TCP", "dst") + " -j KUBE-MARK-MASQ",
				}},
				{Name: ipvsmode.ChainPostrouting, Rules: []string{
					"-m comment --comment " + Quote("Kubernetes endpoints dst ip:port, source ip for solving hairpin purpose") + " " + match("KUBE-LOOP-BACK", "dst,dst,src") + " -j MASQUERADE",
					"-m mark ! --mark 0x4000/0x4000 -j RETURN",
					"-j MARK --set-xmark 0x4000/0x0",
					"-m comment --comment " + Quote("kubernetes service traffic requiring SNAT") + " -j MASQUERADE --random-fully",
				}},
				{Name: ipvsmode.ChainMarkMasq, Rules: []string{"-j MARK --set-xmark 0x4000/0x4000"}},
			},
			Jumps: []Jump{
				jumpTo("OUTPUT", ipvsmode.ChainServices, "kubernetes service portals"),
				jumpTo("PREROUTING", ipvsmode.ChainServices, "kubernetes service portals"),
				jumpTo("POSTROUTING", ipvsmode.ChainPostrouting, "kubernetes postrouting rules"),
			},
		},
		TableFilter: {
			Chains: []Chain{
				{Name: ipvsmode.ChainForward, Rules: []string{
					"-m comment --comment " + Quote("kubernetes forwarding rules") + " -m mark --mark 0x4000/0x4000 -j ACCEPT",
					"-m comment --comment " + Quote("kubernetes forwarding conntrack rule") + " -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
				}},
				{Name: ipvsmode.ChainNodePort, Rules: []string{
					"-m comment --comment " + Quote("Kubernetes health check node port") + " " + match("KUBE-HEALTH-CHECK-NODE-PORT", "dst") + " -j ACCEPT",
				}},
				{Name: ipvsmode.ChainProxyFirewall, Rules: []string{match("KUBE-LOAD-BALANCER", "dst,dst") + " -j KUBE-SOURCE-RANGES-FIREWALL"}},
				{Name: ipvsmode.ChainSourceRangesFirewall, Rules: []string{"-j DROP"}},
				{Name: ipvsmode.ChainIPVSFilter, Rules: []string{
					match("KUBE-LOAD-BALANCER", "dst,dst") + " -j RETURN",
					match("KUBE-CLUSTER-IP", "dst,dst") + " -j RETURN",
					"-m conntrack --ctstate NEW " + match("KUBE-IPVS-IPS", "dst") + " -j REJECT --reject-with " + p.reject,
				}},
				{Name: ipvsmode.ChainIPVSOutFilter, Rules: []string{"-m ipvs --vproto 6 --vaddr " + p.vip + " --vport 443 -j DROP"}},
			},
			Jumps: []Jump{
				jumpTo("INPUT", ipvsmode.ChainIPVSFilter, "kubernetes ipvs access filter"),
				jumpTo("INPUT", ipvsmode.ChainProxyFirewall, "kube-proxy firewall rules"),
				jumpTo("INPUT", ipvsmode.ChainNodePort, "kubernetes health check rules"),
				jumpTo("FORWARD", ipvsmode.ChainProxyFirewall, "kube-proxy firewall rules"),
				jumpTo("FORWARD", ipvsmode.ChainForward, "kubernetes forwarding rules"),
				jumpTo("OUTPUT", ipvsmode.ChainIPVSOutFilter, "kubernetes ipvs access filter"),
			},
		},
	}
}

// rulesetV2 changes V1: nat loses KUBE-LOAD-BALANCER and the OUTPUT jump, gains an external-IP
// rule and changes the loopback rule; filter loses the firewall chains and their jumps.
// KUBE-NODE-PORT, KUBE-POSTROUTING and KUBE-FORWARD stay as they are.
func rulesetV2(f inet.Family) Ruleset {
	p := famOf(f)
	rs := rulesetV1(f)
	rs = without(rs, TableNAT, ipvsmode.ChainLoadBalancer)
	rs = without(rs, TableFilter, ipvsmode.ChainProxyFirewall)
	rs = without(rs, TableFilter, ipvsmode.ChainSourceRangesFirewall)
	nat := rs[TableNAT]
	for i, c := range nat.Chains {
		if c.Name == ipvsmode.ChainServices {
			c.Rules = slices.Clone(c.Rules)
			c.Rules[0] = "-s " + p.loopback + " -m comment --comment " + Quote("local traffic") + " -j RETURN"
			c.Rules = slices.Insert(c.Rules, 2,
				"-m comment --comment "+Quote("Kubernetes service external ip + port for masquerade and filter purpose")+
					" -m set --match-set "+p.set("KUBE-EXTERNAL-IP")+" dst,dst -j KUBE-MARK-MASQ")
			nat.Chains[i] = c
		}
	}
	nat.Jumps = slices.DeleteFunc(slices.Clone(nat.Jumps), func(j Jump) bool { return j.Chain == "OUTPUT" })
	rs[TableNAT] = nat
	return rs
}

// without drops an owned chain from a ruleset, with every rule and jump that leads to it.
func without(rs Ruleset, table Table, chain string) Ruleset {
	out := Ruleset{}
	for t, tr := range rs {
		out[t] = tr
	}
	tr := out[table]
	var n TableRules
	for _, c := range tr.Chains {
		if c.Name == chain {
			continue
		}
		n.Chains = append(n.Chains, Chain{Name: c.Name, Rules: slices.DeleteFunc(slices.Clone(c.Rules), func(r string) bool {
			return ruleTarget(r) == chain
		})})
	}
	for _, j := range tr.Jumps {
		if j.target() != chain {
			n.Jumps = append(n.Jumps, j)
		}
	}
	out[table] = n
	return out
}

// with adds a rule at the end of an owned chain.
func with(rs Ruleset, table Table, chain, rule string) Ruleset {
	out := Ruleset{}
	for t, tr := range rs {
		out[t] = tr
	}
	tr := out[table]
	var n TableRules
	n.Jumps = tr.Jumps
	for _, c := range tr.Chains {
		if c.Name == chain {
			c.Rules = append(slices.Clone(c.Rules), rule)
		}
		n.Chains = append(n.Chains, c)
	}
	out[table] = n
	return out
}

// foreignSeed is another program's state: a foreign chain in each table and foreign rules in
// PREROUTING, POSTROUTING, INPUT and FORWARD, written in iptables-save's canonical form.
const foreignSeed = `*nat
:FOREIGN-NAT - [0:0]
-A PREROUTING -m addrtype --dst-type LOCAL -j FOREIGN-NAT
-A POSTROUTING -m comment --comment "foreign masquerade" -j MASQUERADE
-A FOREIGN-NAT -p tcp -m tcp --dport 8080 -j RETURN
COMMIT
*filter
:FOREIGN-FILTER - [0:0]
-A INPUT -i lo -j ACCEPT
-A FORWARD -m comment --comment "foreign forward" -j FOREIGN-FILTER
-A FOREIGN-FILTER -m conntrack --ctstate INVALID -j DROP
COMMIT
`

// testdata locates a file in this package's testdata directory also when the test binary runs
// elsewhere (the VM runs it from the build cache directory).
func testdata(name string) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return filepath.Join("testdata", name)
	}
	return filepath.Join(filepath.Dir(file), "testdata", name)
}

func dump(t *testing.T, nf Interface) string {
	t.Helper()
	d, err := nf.Dump(context.Background())
	if err != nil {
		t.Fatalf("Dump: %v", err)
	}
	return d
}

func wantRestored(t *testing.T, step string, res Result, want ...Table) {
	t.Helper()
	if !slices.Equal(res.Restored, want) {
		t.Fatalf("%s: restored tables %v, want %v; payloads:\n%v", step, res.Restored, want, res.Payloads)
	}
}

func wantErr(t *testing.T, step string, err, kind error) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Fatalf("%s: error %v, want %v", step, err, kind)
	}
}

// runScenario is the whole life of kipvs's rules next to another program's, for one family.
func runScenario(t *testing.T, env scenarioEnv) {
	ctx := context.Background()
	f := env.nf.Family()
	prefix := strings.ToLower(f.String())
	v1, v2 := rulesetV1(f), rulesetV2(f)

	env.foreign(t, foreignSeed)
	foreignOnly := env.saveAll(t)
	golden.Check(t, prefix+"-foreign.golden", foreignOnly)

	// First apply: everything is created, foreign state kept.
	res, err := env.nf.Apply(ctx, v1)
	if err != nil {
		t.Fatalf("apply v1: %v", err)
	}
	wantRestored(t, "apply v1", res, TableFilter, TableNAT)
	golden.Check(t, prefix+"-v1.golden", dump(t, env.nf))
	golden.Check(t, prefix+"-v1-full.golden", env.saveAll(t))
	if got := Format(v1); got != dump(t, env.nf) {
		t.Fatalf("Dump after apply v1 is not Format(v1):\n%s", got)
	}

	// Second apply: a no-op.
	res, err = env.nf.Apply(ctx, v1)
	if err != nil {
		t.Fatalf("re-apply v1: %v", err)
	}
	wantRestored(t, "re-apply v1", res)

	// Drift: someone flushes KUBE-SERVICES and deletes the POSTROUTING jump.
	env.foreign(t, "*nat\n-F KUBE-SERVICES\n-D POSTROUTING -m comment --comment \"kubernetes postrouting rules\" -j KUBE-POSTROUTING\nCOMMIT\n")
	obs, err := env.nf.Observe(ctx)
	if err != nil {
		t.Fatalf("observe: %v", err)
	}
	diff := Diff(v1, obs)
	if len(diff) != 2 || !strings.HasPrefix(diff[0], "nat: chain KUBE-SERVICES: rule 1 ") || !strings.HasPrefix(diff[1], "nat: POSTROUTING jumps: ") {
		t.Fatalf("drift not detected as expected: %q", diff)
	}
	res, err = env.nf.Apply(ctx, v1)
	if err != nil {
		t.Fatalf("repair: %v", err)
	}
	wantRestored(t, "repair", res, TableNAT)
	golden.Check(t, prefix+"-v1-full.golden", env.saveAll(t))

	// Rejections leave the table as it was.
	_, err = env.nf.Apply(ctx, with(v1, TableNAT, ipvsmode.ChainServices, "-j KUBE-NO-SUCH-CHAIN"))
	wantErr(t, "jump to a missing chain", err, kerr.ErrNotFound)
	_, err = env.nf.Apply(ctx, with(v1, TableFilter, ipvsmode.ChainForward, "-m set --match-set KUBE-NO-SUCH-SET dst -j RETURN"))
	wantErr(t, "match a missing ipset", err, kerr.ErrNotFound)
	env.foreign(t, "*nat\n-A FOREIGN-NAT -j KUBE-NODE-PORT\nCOMMIT\n")
	_, err = env.nf.Apply(ctx, without(v1, TableNAT, ipvsmode.ChainNodePort))
	wantErr(t, "delete a chain a foreign rule references", err, kerr.ErrBusy)
	_, err = env.nf.Apply(ctx, with(v1, TableNAT, ipvsmode.ChainMarkMasq, "-j MARK --or-mark 0x4000"))
	wantErr(t, "non-canonical rule", err, kerr.ErrInvalid)
	golden.Check(t, prefix+"-v1.golden", dump(t, env.nf))

	// A changed ruleset: chains and jumps removed, rules changed, the rest untouched.
	res, err = env.nf.Apply(ctx, v2)
	if err != nil {
		t.Fatalf("apply v2: %v", err)
	}
	wantRestored(t, "apply v2", res, TableFilter, TableNAT)
	golden.Check(t, prefix+"-v2.golden", dump(t, env.nf))
	golden.Check(t, prefix+"-v2-full.golden", env.saveAll(t))

	// Remove: filter goes, nat fails as a whole while FOREIGN-NAT references KUBE-NODE-PORT.
	res, err = env.nf.Remove(ctx)
	wantErr(t, "remove while referenced", err, kerr.ErrBusy)
	wantRestored(t, "remove while referenced", res, TableFilter)
	if got, want := dump(t, env.nf), Format(Ruleset{TableNAT: v2[TableNAT]}); got != want {
		t.Fatalf("after a failed remove of nat:\n%s\nwant\n%s", got, want)
	}
	env.foreign(t, "*nat\n-D FOREIGN-NAT -j KUBE-NODE-PORT\nCOMMIT\n")
	res, err = env.nf.Remove(ctx)
	if err != nil {
		t.Fatalf("remove: %v", err)
	}
	wantRestored(t, "remove", res, TableNAT)
	if d := dump(t, env.nf); d != "" {
		t.Fatalf("Dump after remove:\n%s", d)
	}
	if got := env.saveAll(t); got != foreignOnly {
		t.Fatalf("foreign state changed:\n--- now\n%s--- before\n%s", got, foreignOnly)
	}
	res, err = env.nf.Remove(ctx)
	if err != nil {
		t.Fatalf("second remove: %v", err)
	}
	wantRestored(t, "second remove", res)
}
