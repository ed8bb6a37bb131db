//go:build kernel

package iptables

import (
	"fmt"
	"maps"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/kipvs/kipvs/internal/dataplane"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipset"
	"github.com/kipvs/kipvs/internal/netfilter"
	"github.com/kipvs/kipvs/internal/proxy"
	"github.com/kipvs/kipvs/internal/testutil/netnstest"
)

// sourceNetMembers returns the KUBE-LOAD-BALANCER-SOURCE-CIDR members of ranges source
// ranges x ports ports of LB IP 203.0.113.50, from range first on.
func sourceNetMembers(first, ranges, ports int) []proxy.Member {
	lb := netip.MustParseAddr("203.0.113.50")
	out := make([]proxy.Member, 0, ranges*ports)
	for i := first; i < first+ranges; i++ {
		src := netip.PrefixFrom(netip.AddrFrom4([4]byte{100, byte(64 + i/256), byte(i % 256), 0}), 24)
		for p := range ports {
			out = append(out, proxy.Member{Set: proxy.SetLoadBalancerSourceNet, Addr: lb, Proto: inet.TCP, Port: uint16(8000 + p), Source: src})
		}
	}
	return out
}

// listHeader is `ipset list -t NAME`, the kernel's header of one set as the tool prints it.
func listHeader(t *testing.T, ns *netnstest.NS, name string) string {
	t.Helper()
	return ns.MustRun(t, "ipset", "list", "-t", name)
}

// kubeProxyCreate runs the command kube-proxy v1.34 runs for the set at every sync
// (pkg/proxy/ipvs/ipset: `ipset create NAME TYPE family inet hashsize 1024 maxelem 65536
// -exist`) and returns its error output ("" when it succeeds).
func kubeProxyCreate(ns *netnstest.NS, name, typ string) string {
	out, err := ns.Run("ipset", "create", name, typ, "family", "inet", "hashsize", "1024", "maxelem", "65536", "-exist")
	if err != nil {
		return fmt.Sprintf("%v: %s", err, out)
	}
	return ""
}

// On the kernel: 70,000 members of KUBE-LOAD-BALANCER-SOURCE-CIDR (7,000 ranges x 10 ports)
// go in, 1,000 first, then 69,000 in one batch: the set is grown by swap before the batch
// (`ipset list -t` shows maxelem 131072 and every entry), keeps the iptables rule that
// references it and every member, and the other sets are untouched. kube-proxy's `ipset
// create ... maxelem 65536 -exist` fails on the grown set (the kernel compares maxelem).
// A set far larger than its content (KUBE-CLUSTER-IP created with maxelem 262144) shrinks
// back to 65,536 at its next delete, and kube-proxy's create succeeds on it again. (Each
// member is one netlink request: some 2.5 ms under qemu TCG, so the test takes minutes.)
func TestSetGrowsBySwapKernel(t *testing.T) {
	ns := netnstest.New(t)
	sets, err := ipset.New(ns.Handle)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sets.Close() })
	rules, err := netfilter.New(ns.Handle, inet.IPv4, netfilter.Backend{Mode: netfilter.ModeNFT, Reason: "test"})
	if err != nil {
		t.Fatal(err)
	}
	p := New(inet.IPv4, sets, rules)
	cip := SetName(inet.IPv4, proxy.SetClusterIP)
	ns.MustRun(t, "ipset", "create", cip, "hash:ip,port", "family", "inet", "hashsize", "1024", "maxelem", "262144")
	_, missing, err := p.Members()
	if err != nil {
		t.Fatal(err)
	}
	runTx(t, p, dataplane.Tx{CreateSets: missing})
	name := SetName(inet.IPv4, proxy.SetLoadBalancerSourceNet)
	if msg := kubeProxyCreate(ns, name, "hash:ip,port,net"); msg != "" {
		t.Fatalf("kube-proxy's create of a set kipvs created: %s", msg)
	}
	ns.MustRun(t, "iptables", "-w", "-A", "INPUT", "-m", "set", "--match-set", name, "dst,dst,src", "-j", "ACCEPT")
	others := membersOfEverySet(inet.IPv4)
	runTx(t, p, dataplane.Tx{AddMembers: others})
	runTx(t, p, dataplane.Tx{AddMembers: sourceNetMembers(0, 100, 10)})
	if h := listHeader(t, ns, name); !strings.Contains(h, "maxelem 65536") {
		t.Errorf("at 1,000 members the set is not kube-proxy's size:\n%s", h)
	}
	start := time.Now()
	runTx(t, p, dataplane.Tx{AddMembers: sourceNetMembers(100, 6900, 10)})
	t.Logf("grown and 69,000 members added in %s", time.Since(start).Round(time.Millisecond))
	h := listHeader(t, ns, name)
	t.Logf("ipset list -t %s:\n%s", name, h)
	wantSource := 70000
	for _, m := range others {
		if m.Set == proxy.SetLoadBalancerSourceNet {
			wantSource++
		}
	}
	for _, want := range []string{"maxelem 131072", fmt.Sprintf("Number of entries: %d", wantSource), "References: 1"} {
		if !strings.Contains(h, want) {
			t.Errorf("ipset list -t lacks %q", want)
		}
	}
	if msg := kubeProxyCreate(ns, name, "hash:ip,port,net"); !strings.Contains(msg, "already exists") {
		t.Errorf("kube-proxy's create -exist of the grown set: %q, want the kernel's refusal (set with the same name already exists)", msg)
	} else {
		t.Logf("kube-proxy's create -exist of the grown set: %s", msg)
	}
	got, _, err := p.Members()
	if err != nil {
		t.Fatal(err)
	}
	want := setOf(others)
	maps.Copy(want, setOf(sourceNetMembers(0, 7000, 10)))
	if !maps.Equal(got, want) {
		t.Errorf("after the grow the kernel holds %d members, want %d (every set's content intact)", len(got), len(want))
	}
	if names := ns.MustRun(t, "ipset", "list", "-n"); strings.Contains(names, ipset.TempPrefix) {
		t.Errorf("a temporary set is left:\n%s", names)
	}

	// Shrink: KUBE-CLUSTER-IP, created far too large, holds a few members; one delete.
	var drop []proxy.Member
	for _, m := range others {
		if m.Set == proxy.SetClusterIP {
			drop = append(drop, m)
			break
		}
	}
	before := listHeader(t, ns, cip)
	runTx(t, p, dataplane.Tx{DeleteMembers: drop})
	after := listHeader(t, ns, cip)
	if !strings.Contains(before, "maxelem 262144") || !strings.Contains(after, "maxelem 65536") {
		t.Errorf("KUBE-CLUSTER-IP before the delete:\n%s\nafter:\n%s\nwant maxelem 262144, then 65536", before, after)
	}
	if msg := kubeProxyCreate(ns, cip, "hash:ip,port"); msg != "" {
		t.Errorf("kube-proxy's create of the shrunk set: %s", msg)
	}
	if msg := kubeProxyCreate(ns, name, "hash:ip,port,net"); msg == "" {
		t.Errorf("kube-proxy's create of the grown set succeeded")
	}
}
