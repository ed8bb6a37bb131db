package bench

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// The benchmark's objects live in Namespace, labelled Label=LabelValue.
const (
	Namespace  = "default"
	Label      = "kipvs-bench"
	LabelValue = "1"
	ManagedBy  = "kipvs-bench"
	// ServicePort is every Service's one port (TCP, named "http"); TargetPort the endpoints'.
	ServicePort = 80
	TargetPort  = 8080
	// MaxServices and MaxEndpoints bound N and N*E: the cluster IPs come from the apiserver's
	// 10.96.0.0/16 above 10.96.16.0, the endpoints from 10.128.0.0/9.
	MaxServices  = 60000
	MaxEndpoints = 1<<23 - 2
)

var (
	clusterIPBase = netip.MustParseAddr("10.96.16.0")
	endpointBase  = netip.MustParseAddr("10.128.0.1")
	// replacementBase is where the changes take new endpoint addresses from (10.64.0.0/10,
	// disjoint from the loaded ones).
	replacementBase = netip.MustParseAddr("10.64.0.1")
)

// addN returns a + n for an IPv4 address.
func addN(a netip.Addr, n int) netip.Addr {
	b := a.As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v += uint32(n)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// ServiceName is the name of Service i (and of its EndpointSlice, with a "-0" suffix).
func ServiceName(i int) string { return fmt.Sprintf("bench-%05d", i) }

// ClusterIP is Service i's cluster IP.
func ClusterIP(i int) netip.Addr { return addN(clusterIPBase, i) }

// ReplacementIP is the i-th address the changes may give an endpoint.
func ReplacementIP(i int) netip.Addr { return addN(replacementBase, i) }

// EndpointIP is the address of endpoint e of Service i as loaded.
func EndpointIP(i, e, perService int) netip.Addr { return addN(endpointBase, i*perService+e) }

// CheckSize rejects an N and E the address plan cannot hold.
func CheckSize(n, e int) error {
	switch {
	case n < 1 || n > MaxServices:
		return fmt.Errorf("bench: N=%d: want 1..%d", n, MaxServices)
	case e < 1 || n*e > MaxEndpoints:
		return fmt.Errorf("bench: E=%d: want >= 1 and N*E <= %d", e, MaxEndpoints)
	}
	return nil
}

// Service is Service i: ClusterIP, one TCP port, no selector (the slice is ours).
func Service(i int) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: ServiceName(i), Namespace: Namespace, Labels: map[string]string{Label: LabelValue}},
		Spec: v1.ServiceSpec{
			Type:      v1.ServiceTypeClusterIP,
			ClusterIP: ClusterIP(i).String(),
			Ports: []v1.ServicePort{{
				Name: "http", Protocol: v1.ProtocolTCP, Port: ServicePort, TargetPort: intstr.FromInt32(TargetPort),
			}},
		},
	}
}

// Slice is Service i's EndpointSlice with endpoints addrs, all ready.
func Slice(i int, addrs []netip.Addr) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: ServiceName(i) + "-0", Namespace: Namespace,
			Labels: map[string]string{
				discoveryv1.LabelServiceName: ServiceName(i),
				discoveryv1.LabelManagedBy:   ManagedBy,
				Label:                        LabelValue,
			},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{{
			Name: ptr.To("http"), Protocol: ptr.To(v1.ProtocolTCP), Port: ptr.To[int32](TargetPort),
		}},
		Endpoints: []discoveryv1.Endpoint{},
	}
	for _, a := range addrs {
		s.Endpoints = append(s.Endpoints, Endpoint(a))
	}
	return s
}

// Endpoint is a ready, serving endpoint at a.
func Endpoint(a netip.Addr) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{
		Addresses:  []string{a.String()},
		Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
	}
}

// Load creates Services from..to-1 with their EndpointSlices of e endpoints, with workers
// requests in flight. Objects that exist already are left as they are (a run with several N
// loads the smallest first and adds to it).
func Load(ctx context.Context, cs kubernetes.Interface, from, to, e, workers int) error {
	if err := CheckSize(to, e); err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := loadOne(ctx, cs, i, e); err != nil {
					cancel(err)
				}
			}
		}()
	}
feed:
	for i := from; i < to; i++ {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
}

func loadOne(ctx context.Context, cs kubernetes.Interface, i, e int) error {
	if _, err := cs.CoreV1().Services(Namespace).Create(ctx, Service(i), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("bench: create Service %s: %w", ServiceName(i), err)
	}
	addrs := make([]netip.Addr, e)
	for j := range addrs {
		addrs[j] = EndpointIP(i, j, e)
	}
	if _, err := cs.DiscoveryV1().EndpointSlices(Namespace).Create(ctx, Slice(i, addrs), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("bench: create EndpointSlice of %s: %w", ServiceName(i), err)
	}
	return nil
}
