package harness

import (
	"context"
	"net/netip"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

// Cluster creates and removes the API objects of a scenario.
type Cluster struct {
	CS kubernetes.Interface
}

// NewCluster connects to the e2e apiserver.
func NewCluster(t testing.TB, env Env) *Cluster {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", env.Kubeconfig)
	if err != nil {
		t.Fatalf("kubeconfig %s: %v", env.Kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("API client: %v", err)
	}
	return &Cluster{CS: cs}
}

func apiCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

// EnsureNode creates (or updates) the Node NodeName with spec.podCIDRs NodePodCIDR and the
// InternalIP NodeIP in its status.
func (c *Cluster) EnsureNode(t testing.TB) *v1.Node {
	t.Helper()
	ctx, cancel := apiCtx()
	defer cancel()
	nodes := c.CS.CoreV1().Nodes()
	n, err := nodes.Get(ctx, NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		n, err = nodes.Create(ctx, &v1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: NodeName, Labels: map[string]string{"kubernetes.io/hostname": NodeName}},
			Spec:       v1.NodeSpec{PodCIDR: NodePodCIDR.String(), PodCIDRs: []string{NodePodCIDR.String()}},
		}, metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatalf("node %s: %v", NodeName, err)
	}
	want := []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: NodeIP.String()}, {Type: v1.NodeHostName, Address: NodeName}}
	if len(n.Status.Addresses) != len(want) || n.Status.Addresses[0] != want[0] {
		n.Status.Addresses = want
		if n, err = nodes.UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("node %s: set status.addresses: %v", NodeName, err)
		}
	}
	return n
}

// LabelNode sets (value != "") or removes (value == "") a label of this node's Node and
// restores the label's earlier state when the test ends.
func (c *Cluster) LabelNode(t testing.TB, key, value string) {
	t.Helper()
	set := func(v string, had bool) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			ctx, cancel := apiCtx()
			defer cancel()
			n, err := c.CS.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if n.Labels == nil {
				n.Labels = map[string]string{}
			}
			if had {
				n.Labels[key] = v
			} else {
				delete(n.Labels, key)
			}
			_, err = c.CS.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
			return err
		})
	}
	n := c.EnsureNode(t)
	old, had := n.Labels[key]
	if err := set(value, value != ""); err != nil {
		t.Fatalf("node %s: label %s=%q: %v", NodeName, key, value, err)
	}
	t.Cleanup(func() {
		if err := set(old, had); err != nil {
			t.Errorf("node %s: restore label %s: %v", NodeName, key, err)
		}
	})
}

// Port is one Service port, served by the pods' echo backend on EchoPort.
type Port struct {
	Name     string
	Protocol v1.Protocol
	Port     int32
	NodePort int32 // 0: none requested (allocated for NodePort/LoadBalancer Services)
}

// ServiceSpec describes a Service for CreateService.
type ServiceSpec struct {
	Name        string
	Type        v1.ServiceType // default ClusterIP
	ClusterIP   netip.Addr     // zero: allocated
	Ports       []Port         // default: http TCP 80 and udp UDP 80
	ExternalIPs []netip.Addr
	// ExternalTrafficPolicy for NodePort and LoadBalancer Services (default Cluster).
	ExternalTrafficPolicy v1.ServiceExternalTrafficPolicy
	// Mutate, when set, edits the Service just before it is created (fields ServiceSpec
	// does not name: affinity, traffic policies, annotations, IP families, ...).
	Mutate func(*v1.Service)
}

// DefaultPorts are TCP 80 (http) and UDP 80 (udp).
func DefaultPorts() []Port {
	return []Port{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}, {Name: "udp", Protocol: v1.ProtocolUDP, Port: 80}}
}

// CreateService creates the Service and registers its deletion (and its EndpointSlice's).
func (c *Cluster) CreateService(t testing.TB, s ServiceSpec) *v1.Service {
	t.Helper()
	if len(s.Ports) == 0 {
		s.Ports = DefaultPorts()
	}
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: Namespace},
		Spec:       v1.ServiceSpec{Type: s.Type}, // no selector: the test owns the EndpointSlice
	}
	if svc.Spec.Type == "" {
		svc.Spec.Type = v1.ServiceTypeClusterIP
	}
	if s.ClusterIP.IsValid() {
		svc.Spec.ClusterIP = s.ClusterIP.String()
	}
	for _, p := range s.Ports {
		svc.Spec.Ports = append(svc.Spec.Ports, v1.ServicePort{
			Name: p.Name, Protocol: p.Protocol, Port: p.Port, NodePort: p.NodePort,
			TargetPort: intstr.FromInt32(EchoPort),
		})
	}
	for _, ip := range s.ExternalIPs {
		svc.Spec.ExternalIPs = append(svc.Spec.ExternalIPs, ip.String())
	}
	if svc.Spec.Type == v1.ServiceTypeNodePort || svc.Spec.Type == v1.ServiceTypeLoadBalancer {
		svc.Spec.ExternalTrafficPolicy = s.ExternalTrafficPolicy
		if svc.Spec.ExternalTrafficPolicy == "" {
			svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyCluster
		}
	}
	if s.Mutate != nil {
		s.Mutate(svc)
	}
	ctx, cancel := apiCtx()
	defer cancel()
	out, err := c.CS.CoreV1().Services(Namespace).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Service %s: %v", s.Name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := apiCtx()
		defer cancel()
		if err := c.CS.DiscoveryV1().EndpointSlices(Namespace).Delete(ctx, sliceName(s.Name), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete EndpointSlice %s: %v", sliceName(s.Name), err)
		}
		if err := c.CS.CoreV1().Services(Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete Service %s: %v", s.Name, err)
		}
	})
	return out
}

func sliceName(svc string) string { return svc + "-e2e" }

// DeleteService deletes a Service made by CreateService, and its EndpointSlice, now (the
// clean-up CreateService registered then finds them gone).
func (c *Cluster) DeleteService(t testing.TB, name string) {
	t.Helper()
	ctx, cancel := apiCtx()
	defer cancel()
	if err := c.CS.DiscoveryV1().EndpointSlices(Namespace).Delete(ctx, sliceName(name), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("delete EndpointSlice %s: %v", sliceName(name), err)
	}
	if err := c.CS.CoreV1().Services(Namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete Service %s: %v", name, err)
	}
}

// SetEndpoints makes the Service's EndpointSlice list pods (ready, serving, on NodeName)
// with a port per Service port (same names and protocols, EchoPort). It creates the slice
// on first use and replaces its endpoints afterwards.
func (c *Cluster) SetEndpoints(t testing.TB, svc *v1.Service, pods ...*Pod) {
	t.Helper()
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: sliceName(svc.Name), Namespace: Namespace,
			Labels: map[string]string{
				discoveryv1.LabelServiceName: svc.Name,
				discoveryv1.LabelManagedBy:   "kipvs-e2e",
			},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{},
	}
	for _, p := range svc.Spec.Ports {
		slice.Ports = append(slice.Ports, discoveryv1.EndpointPort{
			Name: ptr.To(p.Name), Protocol: ptr.To(p.Protocol), Port: ptr.To[int32](EchoPort),
		})
	}
	for _, p := range pods {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
			Addresses: []string{p.IP.String()},
			Conditions: discoveryv1.EndpointConditions{
				Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false),
			},
			NodeName:  ptr.To(NodeName),
			TargetRef: &v1.ObjectReference{Kind: "Pod", Namespace: Namespace, Name: p.PodName},
		})
	}
	ctx, cancel := apiCtx()
	defer cancel()
	slices := c.CS.DiscoveryV1().EndpointSlices(Namespace)
	cur, err := slices.Get(ctx, slice.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = slices.Create(ctx, slice, metav1.CreateOptions{})
	case err == nil:
		slice.ResourceVersion = cur.ResourceVersion
		_, err = slices.Update(ctx, slice, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatalf("EndpointSlice %s: %v", slice.Name, err)
	}
}

// SetLoadBalancerIP sets the Service's status.loadBalancer.ingress to ip through the
// status subresource, as a cloud controller would.
func (c *Cluster) SetLoadBalancerIP(t testing.TB, svc *v1.Service, ip netip.Addr) *v1.Service {
	t.Helper()
	return c.SetLoadBalancerIPs(t, svc, ip)
}

// SetLoadBalancerIPs sets the Service's status.loadBalancer.ingress to ips, in order (IP
// mode VIP), through the status subresource.
func (c *Cluster) SetLoadBalancerIPs(t testing.TB, svc *v1.Service, ips ...netip.Addr) *v1.Service {
	t.Helper()
	ctx, cancel := apiCtx()
	defer cancel()
	cur, err := c.CS.CoreV1().Services(Namespace).Get(ctx, svc.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get Service %s: %v", svc.Name, err)
	}
	cur.Status.LoadBalancer.Ingress = nil
	for _, ip := range ips {
		cur.Status.LoadBalancer.Ingress = append(cur.Status.LoadBalancer.Ingress, v1.LoadBalancerIngress{IP: ip.String(), IPMode: ptr.To(v1.LoadBalancerIPModeVIP)})
	}
	out, err := c.CS.CoreV1().Services(Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("Service %s: set status.loadBalancer: %v", svc.Name, err)
	}
	return out
}

// ServiceCIDRServed reports whether the apiserver serves networking.k8s.io/v1 ServiceCIDR.
func (c *Cluster) ServiceCIDRServed(t testing.TB) bool {
	t.Helper()
	list, err := c.CS.Discovery().ServerResourcesForGroupVersion("networking.k8s.io/v1")
	if apierrors.IsNotFound(err) {
		return false
	}
	if err != nil {
		t.Fatalf("discover networking.k8s.io/v1: %v", err)
	}
	for _, r := range list.APIResources {
		if r.Name == "servicecidrs" {
			return true
		}
	}
	return false
}

// LeftoverObjects lists Services (other than default/kubernetes) and EndpointSlices left
// in Namespace, so a scenario can start from a clean API.
func (c *Cluster) LeftoverObjects(t testing.TB) []string {
	t.Helper()
	ctx, cancel := apiCtx()
	defer cancel()
	var out []string
	svcs, err := c.CS.CoreV1().Services(Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list Services: %v", err)
	}
	for _, s := range svcs.Items {
		if s.Name != "kubernetes" {
			out = append(out, "Service "+s.Name)
		}
	}
	sls, err := c.CS.DiscoveryV1().EndpointSlices(Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list EndpointSlices: %v", err)
	}
	for _, s := range sls.Items {
		if s.Labels[discoveryv1.LabelManagedBy] == "kipvs-e2e" {
			out = append(out, "EndpointSlice "+s.Name)
		}
	}
	return out
}

// NodePortOf returns the node port allocated to the Service's port named name.
func NodePortOf(t testing.TB, svc *v1.Service, name string) int32 {
	t.Helper()
	for _, p := range svc.Spec.Ports {
		if p.Name == name {
			if p.NodePort == 0 {
				t.Fatalf("Service %s port %s has no node port", svc.Name, name)
			}
			return p.NodePort
		}
	}
	t.Fatalf("Service %s has no port %s", svc.Name, name)
	return 0
}

// ClusterIPOf returns the Service's cluster IP.
func ClusterIPOf(t testing.TB, svc *v1.Service) netip.Addr {
	t.Helper()
	ip, err := netip.ParseAddr(svc.Spec.ClusterIP)
	if err != nil {
		t.Fatalf("Service %s: clusterIP %q: %v", svc.Name, svc.Spec.ClusterIP, err)
	}
	return ip
}
