//go:build e2e

package tests

import (
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/kipvs/kipvs/e2e/harness"
)

// An SCTP NodePort Service next to TCP Services: kipvs programs the SCTP virtual servers
// (ClusterIP and one per node address for the NodePort), the set KUBE-NODE-PORT-SCTP-HASH
// with an ip,sctp:port member per node address and its KUBE-NODE-PORT rule (-p sctp ...
// -j KUBE-MARK-MASQ) (with the nftables backend: the set node-port-sctp of table ip kipvs
// and its rule in chain node-port), every sync succeeds (healthz 200, no sync errors), a full sync
// finds nothing to repair, the TCP Services (a ClusterIP and a NodePort) serve, and SCTP
// associations from the external client through the NodePort (both node addresses) and
// the ClusterIP are answered by the backends, masqueraded.
//
// It runs once per filter backend (eachBackend).
func TestSCTPNodePortNextToTCP(t *testing.T) { eachBackend(t, testSCTPNodePortNextToTCP) }

func testSCTPNodePortNextToTCP(t *testing.T, s *scenario) {
	var backends []*harness.Pod
	for i := range 2 {
		name := "st" + string(rune('1'+i))
		backends = append(backends, s.topo.AddPod(t, name, netip.AddrFrom4([4]byte{10, 244, 0, 41 + byte(i)}), harness.PodOptions{SCTP: true}))
	}
	ext := s.topo.AddExternal(t)
	sctpVIP := netip.MustParseAddr("10.96.20.10")
	tcpVIP := netip.MustParseAddr("10.96.20.11")
	npVIP := netip.MustParseAddr("10.96.20.12")
	sctpSvc := s.api.CreateService(t, harness.ServiceSpec{
		Name: "i5-sctp", Type: v1.ServiceTypeNodePort, ClusterIP: sctpVIP,
		Ports: []harness.Port{{Name: "sctp", Protocol: v1.ProtocolSCTP, Port: 80}},
	})
	s.api.SetEndpoints(t, sctpSvc, backends...)
	tcpSvc := s.api.CreateService(t, harness.ServiceSpec{
		Name: "i5-tcp", ClusterIP: tcpVIP, Ports: []harness.Port{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}},
	})
	s.api.SetEndpoints(t, tcpSvc, backends...)
	npSvc := s.api.CreateService(t, harness.ServiceSpec{
		Name: "i5-tcp-nodeport", Type: v1.ServiceTypeNodePort, ClusterIP: npVIP,
		Ports: []harness.Port{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}},
	})
	s.api.SetEndpoints(t, npSvc, backends...)
	sctpNP := int(harness.NodePortOf(t, sctpSvc, "sctp"))
	tcpNP := int(harness.NodePortOf(t, npSvc, "http"))

	nodeAddrs := []netip.Addr{harness.NodeIP, harness.ExternalNodeIP.Addr(), harness.PodGateway.Addr()}
	all := harness.Weights(1, backends...)
	want := map[string]map[string]int{
		vs(harness.SCTP, sctpVIP, 80): all,
		vs(harness.TCP, tcpVIP, 80):   all,
		vs(harness.TCP, npVIP, 80):    all,
	}
	for _, ip := range nodeAddrs {
		want[vs(harness.SCTP, ip, sctpNP)] = all
		want[vs(harness.TCP, ip, tcpNP)] = all
	}
	k := s.startChecked("SCTP and TCP Services programmed", harness.IPVSHas(want))
	t.Logf("ipvsadm -Sn:\n%s", harness.DumpIPVS(t))

	if s.backend == nftablesBackend {
		expectSCTPNodePortTable(t, nodeAddrs, sctpNP)
	} else {
		expectSCTPNodePortSet(t, nodeAddrs, sctpNP)
	}
	expectHealthy(t, k)

	// A full sync reads everything back; it must find the SCTP rule and set as written.
	expectNoDrift(t, k)
	expectHealthy(t, k)

	node, c := s.topo.NodeClient(), harness.In(ext)
	src := harness.PodGateway.Addr()
	expectSpread(t, "node -> tcp ClusterIP "+tcpVIP.String(), node, harness.TCP, ap(tcpVIP, 80), 4, src, backends...)
	expectSpread(t, "external -> tcp NodePort on the node's InternalIP", c, harness.TCP, ap(harness.NodeIP, tcpNP), 4, src, backends...)
	expectSpread(t, "external -> tcp NodePort on the node's address facing the client", c, harness.TCP, ap(harness.ExternalNodeIP.Addr(), tcpNP), 4, src, backends...)
	expectSpread(t, "external -> sctp NodePort on the node's address facing the client", c, harness.SCTP, ap(harness.ExternalNodeIP.Addr(), sctpNP), 4, src, backends...)
	expectSpread(t, "external -> sctp NodePort on the node's InternalIP", c, harness.SCTP, ap(harness.NodeIP, sctpNP), 4, src, backends...)
	expectSpread(t, "external -> sctp ClusterIP "+sctpVIP.String(), c, harness.SCTP, ap(sctpVIP, 80), 4, src, backends...)
}

// expectSCTPNodePortSet checks the iptables backend's SCTP node port rule and the members
// of KUBE-NODE-PORT-SCTP-HASH, one per node address.
func expectSCTPNodePortSet(t *testing.T, nodeAddrs []netip.Addr, sctpNP int) {
	t.Helper()
	rules := harness.DumpRules(t, "iptables-save")
	sctpRule := regexp.MustCompile(`(?m)^-A KUBE-NODE-PORT -p sctp -m comment --comment .+ -m set --match-set KUBE-NODE-PORT-SCTP-HASH dst,dst -j KUBE-MARK-MASQ$`)
	if r := sctpRule.FindString(rules); r == "" {
		t.Errorf("iptables-save has no rule matching %s:\n%s", sctpRule, rules)
	} else {
		t.Logf("SCTP NodePort rule: %s", r)
	}
	sets := harness.DumpSets(t)
	for _, ip := range nodeAddrs {
		m := "add KUBE-NODE-PORT-SCTP-HASH " + ip.String() + ",sctp:" + strconv.Itoa(sctpNP)
		if !strings.Contains(sets, m+"\n") {
			t.Errorf("ipset save lacks %q:\n%s", m, sets)
		}
	}
}

// expectSCTPNodePortTable checks the nftables backend's SCTP node port rule (chain node-port
// of ip kipvs) and the elements of its set node-port-sctp, one per node address.
func expectSCTPNodePortTable(t *testing.T, nodeAddrs []netip.Addr, sctpNP int) {
	t.Helper()
	chain := harness.MustRun(t, "nft", "list", "chain", "ip", "kipvs", "node-port")
	if rule := "ip daddr . meta l4proto . th dport @node-port-sctp jump mark-for-masquerade"; !strings.Contains(chain, rule) {
		t.Errorf("chain node-port lacks %q:\n%s", rule, chain)
	}
	set := harness.MustRun(t, "nft", "list", "set", "ip", "kipvs", "node-port-sctp")
	for _, ip := range nodeAddrs {
		if m := ip.String() + " . sctp . " + strconv.Itoa(sctpNP); !strings.Contains(set, m) {
			t.Errorf("set node-port-sctp lacks %q:\n%s", m, set)
		}
	}
}
