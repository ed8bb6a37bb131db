//go:build e2e

package tests

import (
	"net/netip"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	"github.com/kipvs/kipvs/e2e/harness"
)

// Issue 4, endpoint selection (KEP-1669) with real packets: when no endpoint is ready, the
// ones still serving while terminating get the traffic, and that choice is made within the
// scope of each traffic policy.
//   - Cluster policy, every endpoint terminating: both serve.
//   - externalTrafficPolicy Local, this node's only pod terminating while node-b has a ready
//     one: the NodePort and LoadBalancer IP are served by the local terminating pod with the
//     client's own source address (no fallback to node-b); the Service's cluster
//     IP uses the ready remote pod; the health check answers 503 {"localEndpoints":0}, so a
//     load balancer drains the node while it still answers.
//   - internalTrafficPolicy Local, the same: the cluster IP is served by the local
//     terminating pod, not refused.
func TestTerminatingEndpoints(t *testing.T) {
	s := newScenario(t)
	pods := s.pods("te", 10, 2)
	local, remote := pods[0], pods[1]
	client := s.topo.AddPod(t, "tec", netip.MustParseAddr("10.244.0.20"), harness.PodOptions{NoEcho: true})
	ext := s.topo.AddExternal(t)

	vipC := netip.MustParseAddr("10.96.15.10")
	svcC := s.api.CreateService(t, harness.ServiceSpec{Name: "i4-term-cluster", ClusterIP: vipC})
	s.api.SetSlice(t, svcC, "", discoveryv1.AddressTypeIPv4, harness.TerminatingEP(local), harness.TerminatingEP(remote).On(otherNode))

	vipE := netip.MustParseAddr("10.96.15.20")
	lbIP := netip.MustParseAddr("203.0.113.40")
	nodePort := 30082
	svcE := s.api.CreateService(t, harness.ServiceSpec{
		Name: "i4-term-etp-local", Type: v1.ServiceTypeLoadBalancer, ClusterIP: vipE,
		ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyLocal,
		Ports: []harness.Port{
			{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, NodePort: int32(nodePort)},
			{Name: "udp", Protocol: v1.ProtocolUDP, Port: 80, NodePort: int32(nodePort)},
		},
	})
	hcPort := int(svcE.Spec.HealthCheckNodePort)
	if hcPort == 0 {
		t.Fatalf("the apiserver allocated no healthCheckNodePort")
	}
	svcE = s.api.SetLoadBalancerIP(t, svcE, lbIP)
	s.api.SetSlice(t, svcE, "", discoveryv1.AddressTypeIPv4, harness.TerminatingEP(local), harness.ReadyEP(remote).On(otherNode))

	vipI := netip.MustParseAddr("10.96.15.30")
	svcI := s.api.CreateService(t, harness.ServiceSpec{Name: "i4-term-itp-local", ClusterIP: vipI, Mutate: func(svc *v1.Service) {
		svc.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
	}})
	s.api.SetSlice(t, svcI, "", discoveryv1.AddressTypeIPv4, harness.TerminatingEP(local), harness.ReadyEP(remote).On(otherNode))

	npAddr := harness.ExternalNodeIP.Addr()
	want := map[string]map[string]int{}
	for _, p := range []harness.Proto{harness.TCP, harness.UDP} {
		want[vs(p, vipC, 80)] = harness.Weights(1, local, remote)
		want[vs(p, vipE, 80)] = harness.Weights(1, remote)
		want[vs(p, lbIP, 80)] = harness.Weights(1, local)
		want[vs(p, npAddr, nodePort)] = harness.Weights(1, local)
		want[vs(p, vipI, 80)] = harness.Weights(1, local)
	}
	k := s.startKipvs()
	k.WaitSynced(t, programLimit, "terminating endpoints programmed", harness.IPVSHas(want))

	pc, ec := harness.In(&client.NS), harness.In(ext)
	for _, p := range []harness.Proto{harness.TCP, harness.UDP} {
		expectSpread(t, "cluster policy, all terminating: pod -> "+string(p)+" ClusterIP", pc, p, ap(vipC, 80), 12, client.IP, local, remote)
		expectSpread(t, "itp Local, local pod terminating: pod -> "+string(p)+" ClusterIP", pc, p, ap(vipI, 80), 6, client.IP, local)
		expectSpread(t, "etp Local service's cluster IP: pod -> "+string(p)+" ClusterIP", pc, p, ap(vipE, 80), 6, client.IP, remote)
		expectSpread(t, "etp Local, local pod terminating: external -> "+string(p)+" NodePort", ec, p, ap(npAddr, nodePort), 6, harness.ExternalClientIP.Addr(), local)
		expectSpread(t, "etp Local, local pod terminating: external -> "+string(p)+" LoadBalancer IP", ec, p, ap(lbIP, 80), 6, harness.ExternalClientIP.Addr(), local)
	}

	last, _ := waitHealth(t, ec, ap(harness.NodeIP, hcPort), svcE.Name, 503, 0, programLimit)
	t.Logf("health check with only a terminating local endpoint: %s", last)

	m := k.Metrics(t)
	for _, tp := range []string{"internal", "external"} {
		if n := m.Get("kubeproxy_sync_proxy_rules_no_local_endpoints_total", `traffic_policy="`+tp+`"`, `ip_family="IPv4"`); n != 0 {
			t.Errorf(`kubeproxy_sync_proxy_rules_no_local_endpoints_total{traffic_policy=%q} = %v, want 0: a terminating local endpoint still serves`, tp, n)
		}
	}
}
