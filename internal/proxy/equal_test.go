package proxy

import (
	"net/netip"
	"reflect"
	"testing"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/testutil/fieldguard"
)

// The change detection in this package compares fields by hand; these guards change one
// field at a time and fail when a change goes unnoticed, so a field added to a compared type
// fails here until someone decides whether it counts (and says why not, if not).

func guardVirtualServer() VirtualServer {
	return VirtualServer{
		VSKey:     VSKey{Protocol: inet.TCP, Address: netip.MustParseAddr("10.96.0.10"), Port: 80},
		Scheduler: "sh", SchedFlags: []string{"sh-fallback", "sh-port"},
		Persistent: true, Timeout: 60,
		Destinations: []Destination{
			{Address: netip.MustParseAddr("10.244.1.5"), Port: 8080, Weight: 1},
			{Address: netip.MustParseAddr("10.244.2.6"), Port: 8080, Weight: 1},
		},
		Owner: ServicePortName{NamespacedName: nn("web"), Port: "http"},
		Kind:  kindExternalIP,
	}
}

func TestVirtualServerEqualChecksEveryField(t *testing.T) {
	notKernelState := map[string]string{
		"Owner": "not kernel state; Desired.Update compares it besides Equal (TestDesiredUpdateTouchesEveryVirtualServerChange)",
		"Kind":  "not kernel state: it names the virtual server in conflict Problems only, and Desired.Update installs the new value",
	}
	fieldguard.Check(t, guardVirtualServer(), notKernelState, func(a, b VirtualServer) bool { return !a.Equal(&b) })
}

// Desired.Update must install every change of a Service's virtual server and report it
// touched (so the reconciler programs it), but for Kind, which no kernel object shows.
func TestDesiredUpdateTouchesEveryVirtualServerChange(t *testing.T) {
	base := guardVirtualServer()
	muts, err := fieldguard.Mutations(base)
	if err != nil {
		t.Fatal(err)
	}
	state := func(v VirtualServer) *ServiceState {
		return &ServiceState{Name: nn("web"), VirtualServers: []*VirtualServer{&v}}
	}
	for _, m := range muts {
		d := NewDesired(inet.IPv4)
		d.Update(nn("web"), state(base), nil)
		touched := NewTouched()
		d.Update(nn("web"), state(m.Value), touched)
		if got := d.VirtualServer(m.Value.VSKey); got == nil || !reflect.DeepEqual(*got, m.Value) {
			t.Errorf("change of %s: desired holds %+v, want %+v", m.Path, got, m.Value)
		}
		if m.Value.VSKey != base.VSKey && d.VirtualServer(base.VSKey) != nil {
			t.Errorf("change of %s: the old key %s is still desired", m.Path, base.VSKey)
		}
		_, isTouched := touched.VirtualServers[m.Value.VSKey]
		if want := m.Field != "Kind"; isTouched != want {
			t.Errorf("change of %s: touched %v, want %v", m.Path, isTouched, want)
		}
	}
}

func TestOptionsEqualChecksEveryField(t *testing.T) {
	two := func(a, b string) []netip.Addr { return []netip.Addr{netip.MustParseAddr(a), netip.MustParseAddr(b)} }
	base := Options{
		Family: inet.IPv4, Scheduler: "rr", NodeName: testNode,
		NodeLabels:        map[string]string{ZoneLabel: "zone-a", "kubernetes.io/os": "linux"},
		NodePortAddresses: two("192.168.1.10", "192.168.2.10"),
		LocalAddresses:    two("192.168.1.10", "198.51.100.9"),
		MasqueradeAll:     true, MasqueradeBit: 14, MasqueradeRandomFully: true,
		LocalDetector: LocalDetector{Mode: LocalClusterCIDR, Interface: "cbr0",
			CIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("10.245.0.0/16")}},
		StrictARP:             true,
		UnavailableSchedulers: []string{"mh", "sh"},
		ServiceCIDRs:          []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12"), netip.MustParsePrefix("10.0.0.1/32")},
		APIServerAddresses:    two("192.168.1.100", "192.168.1.101"),
		NodeStatusAddresses:   two("192.168.1.10", "34.1.2.3"),
		ExternalIPCIDRs:       []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("fd00:ee::/64")},
		LoadBalancerIPCIDRs:   []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("fd00:1b::/64")},
		PodCIDRs:              []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("10.245.1.0/24")},
		NodeLinkPrefixes:      []netip.Prefix{netip.MustParsePrefix("192.168.1.0/24"), netip.MustParsePrefix("172.31.0.1/32")},
	}
	fieldguard.Check(t, base, nil, func(a, b Options) bool { return !a.Equal(b) })
}

// An empty list or map is no change from a missing one (no rebuild).
func TestOptionsEqualEmptyIsMissing(t *testing.T) {
	empty := Options{
		NodeLabels: map[string]string{}, NodePortAddresses: []netip.Addr{}, LocalAddresses: []netip.Addr{},
		LocalDetector: LocalDetector{CIDRs: []netip.Prefix{}}, UnavailableSchedulers: []string{},
		ServiceCIDRs: []netip.Prefix{}, APIServerAddresses: []netip.Addr{}, NodeStatusAddresses: []netip.Addr{}, ExternalIPCIDRs: []netip.Prefix{}, LoadBalancerIPCIDRs: []netip.Prefix{},
		PodCIDRs: []netip.Prefix{}, NodeLinkPrefixes: []netip.Prefix{},
	}
	if !empty.Equal(Options{}) || !(Options{}).Equal(empty) {
		t.Error("empty lists and maps differ from missing ones")
	}
}

// A Service's contribution is dropped when it holds nothing a reader of Desired sees; every
// field but the listed ones keeps it.
func TestContributesNothingChecksEveryField(t *testing.T) {
	vs := guardVirtualServer()
	full := ServiceState{
		Name:                nn("web"),
		VirtualServers:      []*VirtualServer{&vs},
		Members:             []Member{{Set: SetClusterIP, Addr: netip.MustParseAddr("10.96.0.10"), Proto: inet.TCP, Port: 80}},
		Addresses:           []netip.Addr{netip.MustParseAddr("10.96.0.10")},
		Problems:            []Problem{{Service: nn("web"), Field: "spec", Reason: "R", Message: "m"}},
		HealthCheckNodePort: 32000,
		LocalEndpoints:      1,
		OutFilter:           []VSKey{vs.VSKey},
		NoLocalInternal:     true,
		NoLocalExternal:     true,
	}
	ignored := map[string]string{
		"Name":           "who contributes, not what",
		"LocalEndpoints": "read only together with HealthCheckNodePort (the daemon's health check servers)",
	}
	t.Run("contributesNothing", func(t *testing.T) {
		fieldguard.CheckPresence(t, full, ignored, func(st ServiceState) bool { return st.contributesNothing() })
	})
	t.Run("Desired.Update", func(t *testing.T) {
		fieldguard.CheckPresence(t, full, ignored, func(st ServiceState) bool {
			d := NewDesired(inet.IPv4)
			d.Update(nn("web"), &st, nil)
			return d.Service(nn("web")) == nil
		})
	})
}
