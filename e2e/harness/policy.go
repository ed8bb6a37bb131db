package harness

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netns"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/netnsutil"
)

// Endpoint is one endpoint of an EndpointSlice written by SetSlice.
type Endpoint struct {
	Pod  *Pod
	Addr netip.Addr // default Pod.IP
	Node string     // spec nodeName; default NodeName (this node)

	Ready, Serving, Terminating bool
	// Zones are the endpoint's hints.forZones (topology-aware routing); nil: no hints.
	Zones []string
}

// ReadyEP is pod as a ready, serving endpoint on this node.
func ReadyEP(p *Pod) Endpoint {
	return Endpoint{Pod: p, Ready: true, Serving: true}
}

// TerminatingEP is pod as an endpoint that is terminating but still serving (KEP-1669):
// ready false, serving true, terminating true.
func TerminatingEP(p *Pod) Endpoint {
	return Endpoint{Pod: p, Serving: true, Terminating: true}
}

// InZones returns e with zone hints for the given zones.
func (e Endpoint) InZones(zones ...string) Endpoint { e.Zones = zones; return e }

// On returns e with its nodeName set to node.
func (e Endpoint) On(node string) Endpoint { e.Node = node; return e }

// WithAddr returns e with address a instead of the pod's IPv4 address.
func (e Endpoint) WithAddr(a netip.Addr) Endpoint { e.Addr = a; return e }

// SetSlice makes the Service's EndpointSlice named after it plus suffix hold exactly eps
// (address type at, a port per Service port as SetEndpoints does), creating it on first
// use. The slice SetEndpoints writes is the one with suffix "" (removed with the Service);
// others are removed at the end of the test.
func (c *Cluster) SetSlice(t testing.TB, svc *v1.Service, suffix string, at discoveryv1.AddressType, eps ...Endpoint) {
	t.Helper()
	name := sliceName(svc.Name) + suffix
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: Namespace,
			Labels: map[string]string{
				discoveryv1.LabelServiceName: svc.Name,
				discoveryv1.LabelManagedBy:   "kipvs-e2e",
			},
		},
		AddressType: at,
		Endpoints:   []discoveryv1.Endpoint{},
	}
	for _, p := range svc.Spec.Ports {
		slice.Ports = append(slice.Ports, discoveryv1.EndpointPort{
			Name: ptr.To(p.Name), Protocol: ptr.To(p.Protocol), Port: ptr.To[int32](EchoPort),
		})
	}
	for _, e := range eps {
		addr, node := e.Addr, e.Node
		if !addr.IsValid() {
			addr = e.Pod.IP
		}
		if node == "" {
			node = NodeName
		}
		ep := discoveryv1.Endpoint{
			Addresses: []string{addr.String()},
			Conditions: discoveryv1.EndpointConditions{
				Ready: ptr.To(e.Ready), Serving: ptr.To(e.Serving), Terminating: ptr.To(e.Terminating),
			},
			NodeName: ptr.To(node),
		}
		if e.Zones != nil {
			ep.Hints = &discoveryv1.EndpointHints{}
			for _, z := range e.Zones {
				ep.Hints.ForZones = append(ep.Hints.ForZones, discoveryv1.ForZone{Name: z})
			}
		}
		if e.Pod != nil {
			ep.TargetRef = &v1.ObjectReference{Kind: "Pod", Namespace: Namespace, Name: e.Pod.PodName}
		}
		slice.Endpoints = append(slice.Endpoints, ep)
	}
	ctx, cancel := apiCtx()
	defer cancel()
	slices := c.CS.DiscoveryV1().EndpointSlices(Namespace)
	cur, err := slices.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = slices.Create(ctx, slice, metav1.CreateOptions{})
		if err == nil && suffix != "" {
			t.Cleanup(func() {
				ctx, cancel := apiCtx()
				defer cancel()
				if err := c.CS.DiscoveryV1().EndpointSlices(Namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					t.Errorf("delete EndpointSlice %s: %v", name, err)
				}
			})
		}
	case err == nil:
		slice.ResourceVersion = cur.ResourceVersion
		_, err = slices.Update(ctx, slice, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatalf("EndpointSlice %s: %v", name, err)
	}
}

// UpdateService applies mutate to the current Service name (retrying on conflicts) and
// returns the updated Service.
func (c *Cluster) UpdateService(t testing.TB, name string, mutate func(*v1.Service)) *v1.Service {
	t.Helper()
	var out *v1.Service
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ctx, cancel := apiCtx()
		defer cancel()
		cur, err := c.CS.CoreV1().Services(Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		mutate(cur)
		out, err = c.CS.CoreV1().Services(Namespace).Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("update Service %s: %v", name, err)
	}
	return out
}

// Events lists the events.k8s.io/v1 Events of type typ (e.g. "Warning") that kipvs reported
// regarding Service svc in Namespace.
func (c *Cluster) Events(t testing.TB, svc, typ string) []eventsv1.Event {
	t.Helper()
	ctx, cancel := apiCtx()
	defer cancel()
	list, err := c.CS.EventsV1().Events(Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list Events: %v", err)
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		// Only kipvs's own: the apiserver's controllers report on Services too (its
		// ClusterIP repair loop, say), and those say nothing about kipvs.
		if e.Regarding.Kind == "Service" && e.Regarding.Name == svc && e.Type == typ && e.ReportingController == "kipvs" {
			out = append(out, e)
		}
	}
	return out
}

// EventSummary renders events as "Reason: note" lines.
func EventSummary(evs []eventsv1.Event) string {
	var out []string
	for _, e := range evs {
		out = append(out, fmt.Sprintf("%s %s (by %s/%s): %s", e.Type, e.Reason, e.ReportingController, e.ReportingInstance, e.Note))
	}
	return strings.Join(out, "\n")
}

// ReadIPVSEntry returns the virtual server named as in IPVSTable ("tcp 10.96.0.1:443",
// "udp [fd00::1]:53") with its flags, persistence, counters and real servers, read over
// generic netlink; ok is false when there is none.
func ReadIPVSEntry(name string) (e ipvs.Entry, ok bool, err error) {
	c, err := ipvs.New(netns.None())
	if err != nil {
		return ipvs.Entry{}, false, fmt.Errorf("open IPVS: %w", err)
	}
	defer c.Close()
	tab, err := c.Table()
	if err != nil {
		return ipvs.Entry{}, false, fmt.Errorf("read the IPVS table: %w", err)
	}
	for _, en := range tab {
		k := en.Service.ServiceKey
		if k.FWMark != 0 {
			continue
		}
		if fmt.Sprintf("%s %s", strings.ToLower(k.Protocol.String()), netip.AddrPortFrom(k.Addr, k.Port)) == name {
			return en, true, nil
		}
	}
	return ipvs.Entry{}, false, nil
}

// IPVSNames lists the virtual servers of tab, sorted.
func (tab IPVSTable) Names() []string {
	out := make([]string, 0, len(tab))
	for k := range tab {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// HealthCheck makes one HTTP/1.0 GET / to addr from inside the client's namespace (a
// health check node port) and returns the status code and body.
func (c Client) HealthCheck(addr netip.AddrPort) (int, []byte, error) {
	var code int
	var body []byte
	err := netnsutil.Do(c.ns(), func() error {
		conn, err := net.DialTimeout("tcp", addr.String(), c.timeout())
		if err != nil {
			return err
		}
		defer conn.Close()
		if err := conn.SetDeadline(time.Now().Add(c.timeout())); err != nil {
			return err
		}
		if _, err := io.WriteString(conn, "GET / HTTP/1.0\r\nHost: lb-health-check\r\n\r\n"); err != nil {
			return fmt.Errorf("send request: %w", err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			return fmt.Errorf("read answer: %w", err)
		}
		defer resp.Body.Close()
		code = resp.StatusCode
		body, err = io.ReadAll(resp.Body)
		return err
	})
	if err != nil {
		return 0, nil, fmt.Errorf("health check %s: %w", addr, err)
	}
	return code, body, nil
}

// InNS runs f on a thread inside the client's namespace (sockets f opens belong to it).
func InNS(c Client, f func() error) error { return netnsutil.Do(c.ns(), f) }

// IsTimeout reports whether err is a timeout (a dropped packet), not a refusal.
func IsTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// IPVSServing returns a condition for WaitSynced like IPVSHas, except that real servers at
// weight 0 (TCP ones draining after their endpoint left) are ignored: want lists
// the real servers that get new connections.
func IPVSServing(want map[string]map[string]int) func() (bool, string) {
	return func() (bool, string) {
		tab, err := ReadIPVS()
		if err != nil {
			return false, err.Error()
		}
		serving := IPVSTable{}
		for vs, rss := range tab {
			serving[vs] = map[string]int{}
			for rs, w := range rss {
				if w != 0 {
					serving[vs][rs] = w
				}
			}
		}
		keys := make([]string, 0, len(want))
		for k := range want {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, vs := range keys {
			if ok, why := serving.Matches(vs, want[vs]); !ok {
				return false, why + " (real servers at weight 0 not counted)"
			}
		}
		return true, ""
	}
}
