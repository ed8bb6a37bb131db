package bench

import (
	"maps"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
)

func addrPorts(ss ...string) map[netip.AddrPort]bool {
	out := map[netip.AddrPort]bool{}
	for _, s := range ss {
		out[netip.MustParseAddrPort(s)] = true
	}
	return out
}

func sortedKeys(m map[netip.AddrPort]bool) []string {
	var out []string
	for k := range maps.Keys(m) {
		out = append(out, k.String())
	}
	slices.Sort(out)
	return out
}

var (
	vip0 = VIP{Addr: netip.MustParseAddr("10.96.16.0"), Proto: "tcp", Port: 80}
	vip1 = VIP{Addr: netip.MustParseAddr("10.96.16.1"), Proto: "tcp", Port: 80}
	eps0 = addrPorts("10.128.0.1:8080", "10.128.0.2:8080", "10.128.0.3:8080")
	eps1 = addrPorts("10.128.0.4:8080")
)

func checkProgrammed(t *testing.T, p Programmed, chain0, chain1 string) {
	t.Helper()
	if len(p.Endpoints) != 2 {
		t.Fatalf("%d Services, want 2: %v", len(p.Endpoints), p.Endpoints)
	}
	for vip, want := range map[VIP]map[netip.AddrPort]bool{vip0: eps0, vip1: eps1} {
		if got := p.Endpoints[vip]; !maps.Equal(got, want) {
			t.Errorf("%s: endpoints %v, want %v", vip, sortedKeys(got), sortedKeys(want))
		}
	}
	if p.Chains[vip0] != chain0 || p.Chains[vip1] != chain1 {
		t.Errorf("chains %v, want %s and %s", p.Chains, chain0, chain1)
	}
}

func TestParseNFT(t *testing.T) {
	b, err := os.ReadFile("testdata/nft-table.json")
	if err != nil {
		t.Fatal(err)
	}
	p, err := ParseNFT(b)
	if err != nil {
		t.Fatal(err)
	}
	checkProgrammed(t, p, "service-AAAAAAAA-default/bench-00000/tcp/http", "service-BBBBBBBB-default/bench-00001/tcp/http")

	// An endpoint chain without its dnat is not a programmed endpoint.
	broken := strings.Replace(string(b), `"dnat": {"addr": "10.128.0.2", "port": 8080}`, `"accept": null`, 1)
	if broken == string(b) {
		t.Fatal("the testdata has no dnat to 10.128.0.2:8080")
	}
	if _, err := ParseNFT([]byte(broken)); err == nil || !strings.Contains(err.Error(), "no dnat") {
		t.Errorf("ParseNFT without a dnat: %v, want an error saying so", err)
	}
}

func TestParseNFTChain(t *testing.T) {
	b, err := os.ReadFile("testdata/nft-chain.json")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseNFTChain(b)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, eps0) {
		t.Errorf("endpoints %v, want %v", sortedKeys(got), sortedKeys(eps0))
	}
}

func TestParseIPTablesSave(t *testing.T) {
	b, err := os.ReadFile("testdata/iptables-save-nat.txt")
	if err != nil {
		t.Fatal(err)
	}
	p, err := ParseIPTablesSave(string(b))
	if err != nil {
		t.Fatal(err)
	}
	checkProgrammed(t, p, "KUBE-SVC-AAAAAAAAAAAAAAAA", "KUBE-SVC-BBBBBBBBBBBBBBBB")
}

func TestParseIPTablesChain(t *testing.T) {
	b, err := os.ReadFile("testdata/iptables-svc-chain.txt")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseIPTablesChain(string(b))
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, eps0) {
		t.Errorf("endpoints %v, want %v", sortedKeys(got), sortedKeys(eps0))
	}
	if _, err := ParseIPTablesChain(`-A KUBE-SVC-X -m comment --comment "unterminated -j KUBE-SEP-Y`); err == nil {
		t.Error("ParseIPTablesChain of an unterminated quote: no error")
	}
}

// The first-sync polls list only the programmed cluster IPs: the service-ips map, the
// KUBE-SERVICES chain.
func TestParseProgrammedVIPs(t *testing.T) {
	nft, err := os.ReadFile("testdata/nft-service-ips.json")
	if err != nil {
		t.Fatal(err)
	}
	ipt, err := os.ReadFile("testdata/iptables-services-chain.txt")
	if err != nil {
		t.Fatal(err)
	}
	fromNFT, err := ParseNFT(nft)
	if err != nil {
		t.Fatal(err)
	}
	fromIPT, err := ParseIPTablesSave(string(ipt))
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]Programmed{"nft": fromNFT, "iptables": fromIPT} {
		if len(p.Chains) != 2 || p.Chains[vip0] == "" || p.Chains[vip1] == "" {
			t.Errorf("%s: chains %v, want one for each of %s and %s", name, p.Chains, vip0, vip1)
		}
		for vip, eps := range p.Endpoints {
			if len(eps) != 0 {
				t.Errorf("%s: %s has endpoints %v from a listing without endpoint chains", name, vip, sortedKeys(eps))
			}
		}
	}
}
