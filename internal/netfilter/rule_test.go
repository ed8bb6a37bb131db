package netfilter

import (
	"errors"
	"slices"
	"testing"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvsmode"
	"github.com/kipvs/kipvs/internal/kerr"
)

func TestTokenize(t *testing.T) {
	cases := []struct {
		in   string
		want []string
	}{
		{`-j ACCEPT`, []string{"-j", "ACCEPT"}},
		{`  -j   ACCEPT  `, []string{"-j", "ACCEPT"}},
		{`-m comment --comment "a b" -j X`, []string{"-m", "comment", "--comment", "a b", "-j", "X"}},
		{`--comment "it\'s \"q\" \\ x"`, []string{"--comment", `it's "q" \ x`}},
		{`--comment ""`, []string{"--comment", ""}},
		{`--comment a"b c"d`, []string{"--comment", "ab cd"}},
		{``, nil},
	}
	for _, c := range cases {
		got, err := Tokenize(c.in)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("tokenize(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{`--comment "open`, "-j A\n-j B"} {
		if _, err := Tokenize(bad); !errors.Is(err, kerr.ErrInvalid) {
			t.Errorf("tokenize(%q) error %v, want ErrInvalid", bad, err)
		}
	}
}

// Quote matches what iptables-save printed in the VM for these comments.
func TestQuote(t *testing.T) {
	cases := map[string]string{
		"simple_word":                `simple_word`,
		"with-dash-123":              `with-dash-123`,
		"kubernetes service portals": `"kubernetes service portals"`,
		"ns/svc:port":                `"ns/svc:port"`,
		`it's "q" \ x`:               `"it\'s \"q\" \\ x"`,
		"":                           `""`,
		// Upstream's SCTP set comment, as iptables-save 1.8.9 (nft and legacy) prints it.
		"Kubernetes nodeport SCTP port for masquerade purpose with type 'hash ip:port'": `"Kubernetes nodeport SCTP port for masquerade purpose with type \'hash ip:port\'"`,
	}
	for in, want := range cases {
		if got := Quote(in); got != want {
			t.Errorf("Quote(%q) = %s, want %s", in, got, want)
		}
		words, err := Tokenize("--comment " + Quote(in))
		if err != nil || words[1] != in {
			t.Errorf("Quote(%q) does not round-trip: %q %v", in, words, err)
		}
	}
}

func TestCanonical(t *testing.T) {
	ok := []struct {
		f    inet.Family
		rule string
	}{
		{inet.IPv4, `! -s 10.244.0.0/16 -m comment --comment "Kubernetes service cluster ip + port for masquerade purpose" -m set --match-set KUBE-CLUSTER-IP dst,dst -j KUBE-MARK-MASQ`},
		{inet.IPv4, `-s 127.0.0.0/8 -j RETURN`},
		{inet.IPv4, `-s 10.0.0.1/32 -d 10.0.0.2/32 -i eth0 -o eth1 -p tcp -m tcp --dport 80 -j ACCEPT`},
		{inet.IPv4, `-j MARK --set-xmark 0x4000/0x4000`},
		{inet.IPv4, `-j MARK --set-xmark 0x4000/0x0`},
		{inet.IPv4, `-m mark ! --mark 0x4000/0x4000 -j RETURN`},
		{inet.IPv4, `-m mark --mark 0x4000 -j RETURN`},
		{inet.IPv4, `-m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT`},
		{inet.IPv4, `-m conntrack --ctstate NEW -m set --match-set KUBE-IPVS-IPS dst -j REJECT --reject-with icmp-port-unreachable`},
		{inet.IPv4, `-m comment --comment -s -j RETURN`},
		{inet.IPv4, `-m ipvs --vproto 6 --vaddr 10.96.0.1 --vport 443 -j DROP`},
		{inet.IPv4, `-m state --state NEW -j RETURN`},
		{inet.IPv4, `-j LOG --log-prefix "x y"`},
		{inet.IPv4, ``},
		{inet.IPv6, `! -s fd00::/8 -j RETURN`},
		{inet.IPv6, `-p udp -m udp --sport 53 -j ACCEPT`},
		{inet.IPv4, `-p sctp -m comment --comment "Kubernetes nodeport SCTP port for masquerade purpose with type \'hash ip:port\'" -m set --match-set KUBE-NODE-PORT-SCTP-HASH dst,dst -j KUBE-MARK-MASQ`},
		{inet.IPv4, `-m comment --comment "back\\slash" -j RETURN`},
		{inet.IPv4, `-m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully`},
		{inet.IPv6, `-m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully`},
	}
	for _, c := range ok {
		if err := Canonical(c.f, c.rule); err != nil {
			t.Errorf("Canonical(%s, %q): %v", c.f, c.rule, err)
		}
	}
	bad := []struct {
		f    inet.Family
		rule string
	}{
		{inet.IPv4, `-j MARK --or-mark 0x4000`},
		{inet.IPv4, `-j MARK --xor-mark 0x4000`},
		{inet.IPv4, `-j MARK --set-mark 0x4000`},
		{inet.IPv4, `-j MARK --and-mark 0x4000`},
		{inet.IPv4, `-j CONNMARK --set-mark 0x1`},
		{inet.IPv4, `-m ipvs --vaddr 10.96.0.1 --vproto 6 --vport 443 -j DROP`},
		{inet.IPv4, `-m ipvs --vproto tcp --vaddr 10.96.0.1 --vport 443 -j DROP`},
		{inet.IPv4, `-m ipvs --vproto 6 --vaddr 10.96.0.1/32 --vport 443 -j DROP`},
		{inet.IPv4, `-m mark --mark 0x4000/0xffffffff -j RETURN`},
		{inet.IPv4, `-m mark --mark 16384 -j RETURN`},
		{inet.IPv4, `-m mark --mark 0x04000 -j RETURN`},
		{inet.IPv4, `-s 127.0.0.1 -j RETURN`},
		{inet.IPv4, `-s 10.0.0.1/8 -j RETURN`},
		{inet.IPv4, `-s fd00::/8 -j RETURN`},
		{inet.IPv6, `-s 10.0.0.0/8 -j RETURN`},
		{inet.IPv4, `-m comment --comment x ! -s 10.0.0.0/8 -j RETURN`},
		{inet.IPv4, `-d 10.0.0.0/8 -s 10.1.0.0/16 -j RETURN`},
		{inet.IPv4, `-p tcp --dport 80 -j RETURN`},
		{inet.IPv4, `-p 6 -m tcp --dport 80 -j RETURN`},
		{inet.IPv4, `-p TCP -m tcp --dport 80 -j RETURN`},
		{inet.IPv4, `--source 10.0.0.0/8 -j RETURN`},
		{inet.IPv4, `-m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT`},
		{inet.IPv4, `-j REJECT`},
		{inet.IPv4, `-m comment --comment 'a b' -j RETURN`},
		// iptables-save escapes a single quote inside the double quotes.
		{inet.IPv4, `-p sctp -m comment --comment "Kubernetes nodeport SCTP port for masquerade purpose with type 'hash ip:port'" -m set --match-set KUBE-NODE-PORT-SCTP-HASH dst,dst -j KUBE-MARK-MASQ`},
		{inet.IPv4, `-m comment --comment "back\slash" -j RETURN`},
		{inet.IPv4, `-m comment --comment a.b -j RETURN`},
		{inet.IPv4, `-m comment --comment "simple" -j RETURN`},
		{inet.IPv4, `-j  RETURN`},
		{inet.IPv4, ` -j RETURN`},
	}
	for _, c := range bad {
		if err := Canonical(c.f, c.rule); !errors.Is(err, kerr.ErrInvalid) {
			t.Errorf("Canonical(%s, %q) = %v, want ErrInvalid", c.f, c.rule, err)
		}
	}
}

func TestValidate(t *testing.T) {
	owned, err := newOwnedSet(defaultOwned())
	if err != nil {
		t.Fatal(err)
	}
	if err := validate(inet.IPv4, owned, rulesetV1(inet.IPv4)); err != nil {
		t.Fatalf("v1: %v", err)
	}
	bad := map[string]Ruleset{
		"foreign chain": {TableNAT: {Chains: []Chain{{Name: "FOREIGN"}}}},
		"twice":         {TableNAT: {Chains: []Chain{{Name: ipvsmode.ChainServices}, {Name: ipvsmode.ChainServices}}}},
		"unknown table": {"mangle": {Chains: []Chain{{Name: ipvsmode.ChainServices}}}},
		"jump from a user chain": {TableNAT: {Chains: []Chain{{Name: ipvsmode.ChainServices}},
			Jumps: []Jump{jumpTo(ipvsmode.ChainMarkMasq, ipvsmode.ChainServices, "x")}}},
		"jump to an undeclared chain": {TableNAT: {Chains: []Chain{{Name: ipvsmode.ChainServices}},
			Jumps: []Jump{jumpTo("PREROUTING", ipvsmode.ChainPostrouting, "x")}}},
		"jump to a foreign chain": {TableNAT: {Jumps: []Jump{jumpTo("PREROUTING", "FOREIGN", "x")}}},
		"jump listed twice": {TableNAT: {Chains: []Chain{{Name: ipvsmode.ChainServices}},
			Jumps: []Jump{jumpTo("PREROUTING", ipvsmode.ChainServices, "x"), jumpTo("PREROUTING", ipvsmode.ChainServices, "x")}}},
		"rule to an undeclared owned chain": {TableNAT: {Chains: []Chain{{Name: ipvsmode.ChainServices, Rules: []string{"-j KUBE-MARK-MASQ"}}}}},
		"non-canonical rule":                {TableNAT: {Chains: []Chain{{Name: ipvsmode.ChainServices, Rules: []string{"-s 1.2.3.4 -j RETURN"}}}}},
	}
	for name, rs := range bad {
		if err := validate(inet.IPv4, owned, rs); !errors.Is(err, kerr.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	// A rule may lead to a foreign chain (kubelet's KUBE-MARK-DROP, say): the kernel decides.
	if err := validate(inet.IPv4, owned, Ruleset{TableNAT: {Chains: []Chain{{Name: ipvsmode.ChainServices, Rules: []string{"-j KUBE-MARK-DROP"}}}}}); err != nil {
		t.Fatal(err)
	}
	for name, o := range map[string]ownedChains{
		"builtin":  {TableNAT: {"PREROUTING"}},
		"target":   {TableNAT: {"ACCEPT"}},
		"too long": {TableNAT: {"KUBE-ABCDEFGHIJKLMNOPQRSTUVWXYZ"}},
		"table":    {"nope": {"KUBE-X"}},
	} {
		if _, err := newOwnedSet(o); !errors.Is(err, kerr.ErrInvalid) {
			t.Errorf("owned %s: %v, want ErrInvalid", name, err)
		}
	}
}
