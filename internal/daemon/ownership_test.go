package daemon

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kipvs/kipvs/internal/config"
	"github.com/kipvs/kipvs/internal/conntrack/conntracktest"
	"github.com/kipvs/kipvs/internal/dataplane/iptables"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/reconcile"
	"github.com/kipvs/kipvs/internal/watch"
)

// ownNode is a daemon over the fakes and a memSource that records its Events.
type ownNode struct {
	node *dualNode
	src  *memSource
	ev   *recordedEvents
	d    *Daemon
}

func newOwnNode(t *testing.T, cfg config.Config) *ownNode {
	t.Helper()
	n := newDualNode()
	src := newMemSource(fuzzNodeName)
	ev := &recordedEvents{}
	cfg.IPVS.MinSyncPeriod = 0
	cfg.IPVS.SyncPeriod = time.Hour
	deps := Deps{
		Source: src, IPVS: n.ipvs, Events: ev,
		Kernel: func(f inet.Family) (reconcile.Kernel, error) {
			nf := n.nf4
			if f == inet.IPv6 {
				nf = n.nf6
			}
			return reconcile.Kernel{IPVS: n.ipvs, Filter: iptables.New(f, n.ipset, nf), Dummy: n.dummy, Conntrack: conntracktest.NewFake()}, nil
		},
		Sysctl:            n.sysctl,
		HostAddrs:         func() ([]netip.Addr, error) { return slices.Clone(fuzzHostAddrs), nil },
		KernelRelease:     "6.1.0-56-amd64",
		NumCPU:            4,
		Registry:          prometheus.NewRegistry(),
		HealthCheckListen: newMemListener,
	}
	d, err := New(cfg, fuzzNodeName, zap.NewNop(), deps)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.hc.Close() })
	return &ownNode{node: n, src: src, ev: ev, d: d}
}

func (o *ownNode) sync(t *testing.T, full bool) {
	t.Helper()
	if err := o.d.sync(context.Background(), full); err != nil {
		t.Fatalf("sync (full %t): %v", full, err)
	}
}

// vsBlock returns the ipvsadm lines of one virtual server: its -A line and its real servers.
func vsBlock(dump, vs string) string {
	var out []string
	in := false
	for _, l := range strings.Split(dump, "\n") {
		if strings.HasPrefix(l, "-A ") {
			in = strings.Contains(l, " "+vs+" ")
		}
		if in && l != "" {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func ownSvc(ns, name, clusterIP string, ports ...v1.ServicePort) *v1.Service {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, ClusterIP: clusterIP, ClusterIPs: []string{clusterIP}, Ports: ports}}
}

func ownSlice(ns, svc, name, port string, number int32, proto v1.Protocol, addrs ...string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(port), Port: ptr.To(number), Protocol: ptr.To(proto)}},
	}
	for _, a := range addrs {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}, NodeName: ptr.To("node-b")})
	}
	return s
}

// victimObjects are default/kubernetes and kube-system/kube-dns with their endpoints.
func victimObjects() ([]*v1.Service, []*discoveryv1.EndpointSlice) {
	tcp, udp := v1.ProtocolTCP, v1.ProtocolUDP
	return []*v1.Service{
			ownSvc("default", "kubernetes", "10.96.0.1", v1.ServicePort{Name: "https", Port: 443, Protocol: tcp}),
			ownSvc("kube-system", "kube-dns", "10.96.0.10", v1.ServicePort{Name: "dns", Port: 53, Protocol: udp}, v1.ServicePort{Name: "dns-tcp", Port: 53, Protocol: tcp}),
		}, []*discoveryv1.EndpointSlice{
			ownSlice("default", "kubernetes", "kubernetes", "https", 6443, tcp, "192.168.1.100"),
			ownSlice("kube-system", "kube-dns", "kube-dns-1", "dns", 53, udp, "10.244.0.5", "10.244.3.6"),
			ownSlice("kube-system", "kube-dns", "kube-dns-2", "dns-tcp", 53, tcp, "10.244.0.5", "10.244.3.6"),
		}
}

// hostileTenant is issue 23's tenant: externalIPs on the kubernetes and kube-dns cluster
// IPs, ports 443/TCP and 53/UDP+TCP, backed by its own pod.
func hostileTenant(ns string) (*v1.Service, []*discoveryv1.EndpointSlice) {
	tcp, udp := v1.ProtocolTCP, v1.ProtocolUDP
	s := ownSvc(ns, "evil", "10.96.200.7", v1.ServicePort{Name: "https", Port: 443, Protocol: tcp},
		v1.ServicePort{Name: "dns", Port: 53, Protocol: udp}, v1.ServicePort{Name: "dns-tcp", Port: 53, Protocol: tcp})
	s.Spec.ExternalIPs = []string{"10.96.0.1", "10.96.0.10"}
	return s, []*discoveryv1.EndpointSlice{
		ownSlice(ns, "evil", "evil-1", "https", 8443, tcp, "10.244.7.7"),
		ownSlice(ns, "evil", "evil-2", "dns", 5353, udp, "10.244.7.7"),
		ownSlice(ns, "evil", "evil-3", "dns-tcp", 5353, tcp, "10.244.7.7"),
	}
}

// Issue 23, finding 1, over the whole daemon: a tenant's externalIPs on the kubernetes and
// kube-dns cluster IPs, in a namespace that sorts before or after theirs, arriving after
// them (an incremental sync), leave their real servers and set members exactly as they
// were; the Warning Events land on the tenant only, in the sync that saw it, and a later
// full sync does not repeat them. With the Service CIDR known, the claims are refused
// outright. Events are aggregated (eventagg.go): one per Service and reason, counting the
// problems and naming the fields.
func TestHostileExternalIPsLeaveClusterIPsAlone(t *testing.T) {
	for _, tc := range []struct {
		ns          string
		serviceCIDR bool
		wantReason  string
		wantCount   int
		wantFields  []string
	}{
		{"app", false, "VirtualServerConflict", 3, []string{"spec.externalIPs"}},
		{"zzz", false, "VirtualServerConflict", 3, []string{"spec.externalIPs"}},
		{"app", true, "ExternalIPInServiceCIDR", 2, []string{"spec.externalIPs[0]", "spec.externalIPs[1]"}},
	} {
		t.Run(fmt.Sprintf("%s/service-cidr=%t", tc.ns, tc.serviceCIDR), func(t *testing.T) {
			cfg := config.Defaults()
			cfg.ClusterCIDRs = []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}
			if tc.serviceCIDR {
				cfg.Kipvs.ServiceCIDRs = []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")}
			}
			n := newOwnNode(t, cfg)
			svcs, eps := victimObjects()
			// The endpoints run on this node, so this node is the one that sends the
			// Services' Service-wide Events (reporter.go): the only node with endpoints.
			onThisNode := func(eps []*discoveryv1.EndpointSlice) {
				for _, s := range eps {
					for i := range s.Endpoints {
						s.Endpoints[i].NodeName = ptr.To(fuzzNodeName)
					}
				}
			}
			onThisNode(eps)
			n.src.Set(svcs, eps, nil, false)
			n.sync(t, true)
			before, err := n.node.dump()
			if err != nil {
				t.Fatal(err)
			}

			evil, evilEps := hostileTenant(tc.ns)
			onThisNode(evilEps)
			n.src.Set(append(slices.Clone(svcs), evil), append(slices.Clone(eps), evilEps...), nil, false)
			n.sync(t, false)
			after, err := n.node.dump()
			if err != nil {
				t.Fatal(err)
			}
			for _, vs := range []string{"10.96.0.1:443", "10.96.0.10:53"} {
				if b, a := vsBlock(before.ipvs, vs), vsBlock(after.ipvs, vs); a != b {
					t.Errorf("the tenant changed %s:\n--- before ---\n%s\n--- after ---\n%s", vs, b, a)
				}
			}
			// (Ports of those addresses no cluster IP has are not the victims'; the Service
			// CIDR check refuses them, below.)
			for _, l := range strings.Split(after.ipset, "\n") {
				victim := strings.Contains(l, " 10.96.0.1,tcp:443") || strings.Contains(l, " 10.96.0.10,udp:53") || strings.Contains(l, " 10.96.0.10,tcp:53")
				if victim && !strings.Contains(before.ipset, l) || tc.serviceCIDR && l != "" && !strings.Contains(before.ipset, l) && strings.Contains(l, "EXTERNAL") {
					t.Errorf("the tenant added a set member on a victim's address: %s", l)
				}
			}
			evs := n.ev.all()
			for _, e := range evs {
				if !strings.HasPrefix(e, tc.ns+"/evil ") {
					t.Errorf("event not on the tenant: %s", e)
				}
			}
			want := fmt.Sprintf("%s/evil %s %d problems", tc.ns, tc.wantReason, tc.wantCount)
			if len(evs) != 1 || !strings.HasPrefix(evs[0], want) {
				t.Fatalf("events after the tenant's incremental sync = %q, want one starting %q", evs, want)
			}
			for _, f := range tc.wantFields {
				if !strings.Contains(evs[0], f) {
					t.Errorf("event %q does not name %s", evs[0], f)
				}
			}
			count := len(n.ev.all())
			n.sync(t, true)
			if evs := n.ev.all(); len(evs) != count {
				t.Errorf("a full sync repeated events: %q", evs[count:])
			}
		})
	}
}

func TestHostAddr(t *testing.T) {
	for in, want := range map[string]string{
		"https://192.168.1.100:6443": "192.168.1.100",
		"https://[fd00::1]:6443":     "fd00::1",
		"10.96.0.1":                  "10.96.0.1",
		"10.0.2.100:6443":            "10.0.2.100",
		"https://api.example.com":    "",
		"https://[fe80::1%eth0]:443": "",
	} {
		a, ok := hostAddr(in)
		if got := ""; ok {
			got = a.String()
			if got != want {
				t.Errorf("hostAddr(%q) = %s, want %q", in, got, want)
			}
		} else if want != "" {
			t.Errorf("hostAddr(%q) = none, want %s", in, want)
		}
	}
}

// The Service CIDRs the proxy refuses claims in: the API's when it serves them, else the
// configured ones, and default/kubernetes's cluster IP in any case; per family.
func TestServiceCIDRsForClaims(t *testing.T) {
	pp := netip.MustParsePrefix
	flag := []netip.Prefix{pp("10.96.0.0/12"), pp("fd00:96::/108")}
	api := watch.ServiceCIDRs{Origin: watch.ServiceCIDRsFromAPI, CIDRs: []netip.Prefix{pp("10.100.0.0/16")},
		KubernetesServiceIPs: []netip.Addr{netip.MustParseAddr("10.100.0.1"), netip.MustParseAddr("fd00:100::1")}}
	onlyKube := watch.ServiceCIDRs{Origin: watch.ServiceCIDRsFromKubernetesService, KubernetesServiceIPs: []netip.Addr{netip.MustParseAddr("10.200.0.1")}}
	for _, tc := range []struct {
		sc   watch.ServiceCIDRs
		conf []netip.Prefix
		f    inet.Family
		want string
	}{
		{api, flag, inet.IPv4, "[10.100.0.0/16]"},
		{api, flag, inet.IPv6, "[fd00:100::1/128]"},
		{onlyKube, flag, inet.IPv4, "[10.96.0.0/12 10.200.0.1/32]"},
		{onlyKube, nil, inet.IPv4, "[10.200.0.1/32]"},
		{watch.ServiceCIDRs{}, flag, inet.IPv6, "[fd00:96::/108]"},
	} {
		if got := fmt.Sprint(serviceCIDRs(tc.f, tc.sc, tc.conf)); got != tc.want {
			t.Errorf("serviceCIDRs(%s, %+v, %v) = %s, want %s", tc.f, tc.sc, tc.conf, got, tc.want)
		}
	}
}
