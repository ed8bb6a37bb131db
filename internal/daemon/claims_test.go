package daemon

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/kipvs/kipvs/internal/testutil/poll"
)

// claimsStream is a cluster as the file source serves it: the apiserver at apiserver
// (default/kubernetes's endpoint), CoreDNS in a pod at 10.244.0.5, and a tenant whose
// Service claims, as external IPs, the CoreDNS pod's address, the apiserver's, the node's
// gateway (192.168.1.1, on the node's link 192.168.1.0/24), a public address, and 10.0.0.101
// (nobody's, until the apiserver moves there from 10.0.0.100).
func claimsStream(apiserver string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: kubernetes, namespace: default}
spec:
  clusterIP: 10.96.0.1
  ports: [{name: https, port: 443, targetPort: 6443}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: kubernetes, namespace: default, labels: {kubernetes.io/service-name: kubernetes}}
addressType: IPv4
ports: [{name: https, port: 6443, protocol: TCP}]
endpoints:
- addresses: [%s]
---
apiVersion: v1
kind: Service
metadata: {name: kube-dns, namespace: kube-system}
spec:
  clusterIP: 10.96.0.10
  ports: [{name: dns, port: 53, protocol: UDP}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: kube-dns-1, namespace: kube-system, labels: {kubernetes.io/service-name: kube-dns}}
addressType: IPv4
ports: [{name: dns, port: 53, protocol: UDP}]
endpoints:
- addresses: [10.244.0.5]
---
apiVersion: v1
kind: Service
metadata: {name: evil, namespace: app}
spec:
  clusterIP: 10.96.200.7
  externalIPs: [10.244.0.5, 10.0.0.100, 192.168.1.1, 203.0.113.8, 10.0.0.101]
  ports: [{name: dns, port: 53, protocol: UDP, targetPort: 5353}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: evil-1, namespace: app, labels: {kubernetes.io/service-name: evil}}
addressType: IPv4
ports: [{name: dns, port: 5353, protocol: UDP}]
endpoints:
- addresses: [10.244.7.7]
`, apiserver)
}

// A tenant's external IPs on a pod's address (CoreDNS's), on the apiserver's (learned from
// default/kubernetes's endpoints: the kubeconfig names the apiserver by a host name, so
// Deps.APIServerAddrs is empty) and on the node's gateway are not bound, have no virtual
// server, and each gets a Warning Event naming its field; the tenant's other external IPs
// and every other Service are programmed. When the apiserver moves, the guard follows it.
func TestClaimedNeighbourAddressesRefused(t *testing.T) {
	log := zaptest.NewLogger(t)
	path := filepath.Join(t.TempDir(), "s.yaml")
	write := func(apiserver string) {
		t.Helper()
		if err := os.WriteFile(path+".tmp", []byte(claimsStream(apiserver)), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	write("10.0.0.100")
	node := newFakeNode()
	ev := &recordedEvents{}
	deps := node.deps(startFileSource(t, t.Context(), path, log), prometheus.NewRegistry())
	deps.Events = ev
	deps.NodeLinks = func() ([]netip.Prefix, error) {
		return []netip.Prefix{netip.MustParsePrefix("192.168.1.0/24")}, nil
	}
	cfg := testConfig(t) // --cluster-cidr 10.244.0.0/16
	cfg.Kipvs.SourceFile = path
	startDaemon(t, cfg, log, deps)

	// state reports what is wrong with the kernel: want programs, refuse does not.
	state := func(want, refuse []string) (bool, string) {
		ipvsDump, err := node.ipvs.Dump()
		if err != nil {
			return false, err.Error()
		}
		bound, err := node.dummy.Dump()
		if err != nil {
			return false, err.Error()
		}
		var bad []string
		for _, a := range want {
			if !strings.Contains(ipvsDump, "-A -u "+a+":53 ") || !strings.Contains(bound, a+"/32") {
				bad = append(bad, a+" not programmed")
			}
		}
		for _, a := range refuse {
			if strings.Contains(ipvsDump, "-A -u "+a+":53 ") || strings.Contains(bound, a+"/32") {
				bad = append(bad, a+" programmed")
			}
		}
		return len(bad) == 0, fmt.Sprintf("%v\n%s\n%s", bad, ipvsDump, bound)
	}
	ok, why := state([]string{"10.96.0.10", "203.0.113.8", "10.0.0.101"}, []string{"10.244.0.5", "10.0.0.100", "192.168.1.1"})
	if !ok {
		t.Errorf("after the first sync: %s", why)
	}
	got := strings.Join(ev.all(), "\n")
	for _, want := range []string{
		"app/evil ExternalIPInPodCIDR spec.externalIPs[0]: external IP 10.244.0.5 is inside the pod CIDR 10.244.0.0/16",
		"app/evil ExternalIPIsAPIServer spec.externalIPs[1]: external IP 10.0.0.100 ",
		"app/evil ExternalIPOnNodeLink spec.externalIPs[2]: external IP 192.168.1.1 is inside 192.168.1.0/24",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("events lack %q:\n%s", want, got)
		}
	}
	for _, field := range []string{"spec.externalIPs[0]", "spec.externalIPs[1]", "spec.externalIPs[2]"} {
		if !strings.Contains(got, field) {
			t.Errorf("events do not name %s:\n%s", field, got)
		}
	}
	if strings.Contains(got, "spec.externalIPs[3]") || strings.Contains(got, "spec.externalIPs[4]") {
		t.Errorf("an event names an address nobody owns:\n%s", got)
	}

	// The apiserver moves to 10.0.0.101: only default/kubernetes's slice changes.
	write("10.0.0.101")
	poll.Until(t, waitLimit, "10.0.0.101 refused, 10.0.0.100 programmed", func() (bool, string) {
		return state([]string{"10.96.0.10", "203.0.113.8", "10.0.0.100"}, []string{"10.244.0.5", "10.0.0.101", "192.168.1.1"})
	})
}
