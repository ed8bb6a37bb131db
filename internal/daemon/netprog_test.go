package daemon

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// npSeries is one kubeproxy_network_programming_duration_seconds series.
type npSeries struct {
	Count uint64
	Sum   float64
}

// networkProgramming reads kubeproxy_network_programming_duration_seconds by ip_family.
func networkProgramming(t *testing.T, d *Daemon) map[string]npSeries {
	t.Helper()
	mfs, err := d.deps.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]npSeries{}
	for _, mf := range mfs {
		if mf.GetName() != "kubeproxy_network_programming_duration_seconds" {
			continue
		}
		for _, m := range mf.Metric {
			fam := ""
			for _, l := range m.Label {
				if l.GetName() == "ip_family" {
					fam = l.GetValue()
				}
			}
			out[fam] = npSeries{Count: m.GetHistogram().GetSampleCount(), Sum: m.GetHistogram().GetSampleSum()}
		}
	}
	return out
}

// A Service's change is observed in kubeproxy_network_programming_duration_seconds of the
// families the Service has, as upstream, where each family's proxier sees only its own
// family's EndpointSlices: an IPv4-only Service's change counts in IPv4 alone, an IPv6-only
// one's in IPv6 alone, a dual-stack one's in both; by incremental and full syncs alike.
func TestNetworkProgrammingPerFamily(t *testing.T) {
	f, err := newFuzzDaemon("ClusterCIDR")
	if err != nil {
		t.Fatal(err)
	}
	defer f.close()
	now := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	f.d.deps.Clock = testingclock.NewFakeClock(now)

	name := func(n string) types.NamespacedName { return types.NamespacedName{Namespace: "default", Name: n} }
	svc := func(n string, ips ...string) *v1.Service {
		s := &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: n},
			Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, ClusterIP: ips[0], ClusterIPs: ips,
				Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}}},
		}
		for _, ip := range ips {
			fam := v1.IPv4Protocol
			if netip.MustParseAddr(ip).Is6() {
				fam = v1.IPv6Protocol
			}
			s.Spec.IPFamilies = append(s.Spec.IPFamilies, fam)
		}
		return s
	}
	slice := func(svcName string, at discoveryv1.AddressType, addr string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: svcName + "-" + string(at),
				Labels: map[string]string{discoveryv1.LabelServiceName: svcName}},
			AddressType: at,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(v1.ProtocolTCP), Port: ptr.To[int32](8080)}},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		}
	}
	objs := func(last string) objects {
		return objects{
			services: []*v1.Service{svc("v4", "10.96.0.10"), svc("v6", "fd00:96::10"), svc("dual", "10.96.0.11", "fd00:96::11")},
			slices: []*discoveryv1.EndpointSlice{
				slice("v4", discoveryv1.AddressTypeIPv4, "10.244.0."+last),
				slice("v6", discoveryv1.AddressTypeIPv6, "fd00:10:244::"+last),
				slice("dual", discoveryv1.AddressTypeIPv4, "10.244.1."+last),
				slice("dual", discoveryv1.AddressTypeIPv6, "fd00:10:244:1::"+last),
			},
			node: &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: fuzzNodeName}},
		}
	}
	ctx := context.Background()
	f.set(objs("5"), false)
	if err := f.d.sync(ctx, true); err != nil {
		t.Fatal(err)
	}
	if got, want := networkProgramming(t, f.d), map[string]npSeries{}; !cmp.Equal(got, want) {
		t.Fatalf("after the first sync, with no trigger time: %v", got)
	}

	// Every Service's endpoint replaced, each with a trigger time: an incremental sync.
	f.set(objs("6"), false)
	f.src.Trigger(name("v4"), now.Add(-3*time.Second))
	f.src.Trigger(name("v6"), now.Add(-2*time.Second))
	f.src.Trigger(name("dual"), now.Add(-1*time.Second))
	if err := f.d.sync(ctx, false); err != nil {
		t.Fatal(err)
	}
	want := map[string]npSeries{"IPv4": {Count: 2, Sum: 4}, "IPv6": {Count: 2, Sum: 3}}
	if diff := cmp.Diff(want, networkProgramming(t, f.d)); diff != "" {
		t.Errorf("after an incremental sync (-want +got):\n%s", diff)
	}

	// The IPv4-only Service again, carried by a full sync.
	f.set(objs("7"), false)
	f.src.Trigger(name("v4"), now.Add(-5*time.Second))
	if err := f.d.sync(ctx, true); err != nil {
		t.Fatal(err)
	}
	want = map[string]npSeries{"IPv4": {Count: 3, Sum: 9}, "IPv6": {Count: 2, Sum: 3}}
	if diff := cmp.Diff(want, networkProgramming(t, f.d)); diff != "" {
		t.Errorf("after a full sync (-want +got):\n%s", diff)
	}
}
