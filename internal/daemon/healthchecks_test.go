package daemon

import (
	"context"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/kipvs/kipvs/internal/config"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/testutil/poll"
)

// As kube-proxy's service health server: the health check node ports listen on every
// address unless nodePortAddresses limits every proxied family, then on the node's
// addresses inside it (read at start).
func TestHealthCheckAddrs(t *testing.T) {
	host := []netip.Addr{netip.MustParseAddr("192.168.1.10"), netip.MustParseAddr("10.0.0.5"), netip.MustParseAddr("fd00:1::10")}
	v4, both := []inet.Family{inet.IPv4}, []inet.Family{inet.IPv4, inet.IPv6}
	for _, tc := range []struct {
		name    string
		cidrs   []string
		primary bool
		fams    []inet.Family
		want    []string // nil: every address
	}{
		{"unset", nil, false, v4, nil},
		{"IPv4 CIDR", []string{"192.168.1.0/24"}, false, v4, []string{"192.168.1.10"}},
		{"two CIDRs", []string{"192.168.1.0/24", "10.0.0.0/8"}, false, v4, []string{"192.168.1.10", "10.0.0.5"}},
		{"0.0.0.0/0 is every address", []string{"0.0.0.0/0"}, false, v4, nil},
		{"IPv6 unlimited", []string{"192.168.1.0/24"}, false, both, nil},
		{"both limited", []string{"192.168.1.0/24", "fd00:1::/64"}, false, both, []string{"192.168.1.10", "fd00:1::10"}},
		{"no address inside", []string{"172.16.0.0/12"}, false, v4, []string{}},
		{"primary is --bind-address", nil, true, v4, []string{"10.0.0.5"}},
		{"primary without an IPv6 node IP", nil, true, both, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Defaults()
			for _, c := range tc.cidrs {
				cfg.NodePortAddresses = append(cfg.NodePortAddresses, netip.MustParsePrefix(c))
			}
			cfg.NodePortPrimary = tc.primary
			cfg.BindAddress = netip.MustParseAddr("10.0.0.5")
			got, all := healthCheckAddrs(&cfg, tc.fams, "node-a", nil, host)
			if tc.want == nil {
				if !all || got != nil {
					t.Errorf("healthCheckAddrs = %q, %v; want every address", got, all)
				}
				return
			}
			if all || !slices.Equal(got, tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
				t.Errorf("healthCheckAddrs = %q, %v; want %q", got, all, tc.want)
			}
		})
	}
}

// The daemon opens a health check node port on the addresses healthCheckAddrs gives.
func TestHealthCheckListensOnNodePortAddresses(t *testing.T) {
	stream := oneService + `---
apiVersion: v1
kind: Service
metadata: {name: lb, namespace: default}
spec:
  type: LoadBalancer
  clusterIP: 10.96.0.30
  externalTrafficPolicy: Local
  healthCheckNodePort: 31999
  ports: [{name: http, port: 80, targetPort: 8080, nodePort: 30080}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: lb-1, namespace: default, labels: {kubernetes.io/service-name: lb}}
addressType: IPv4
ports: [{name: http, port: 8080, protocol: TCP}]
endpoints:
- {addresses: [10.244.1.7], nodeName: node-a}
`
	for _, tc := range []struct {
		cidrs []netip.Prefix
		want  string
	}{
		{nil, ":31999"},
		{[]netip.Prefix{netip.MustParsePrefix("192.168.1.0/24")}, "192.168.1.10:31999"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			log := zaptest.NewLogger(t)
			path := filepath.Join(t.TempDir(), "s.yaml")
			if err := os.WriteFile(path, []byte(stream), 0o644); err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var opened []string
			deps := newFakeNode().deps(startFileSource(t, t.Context(), path, log), prometheus.NewRegistry())
			deps.HealthCheckListen = func(ctx context.Context, addr string) (net.Listener, error) {
				mu.Lock()
				opened = append(opened, addr)
				mu.Unlock()
				return newMemListener(ctx, addr)
			}
			cfg := testConfig(t)
			cfg.Kipvs.SourceFile = path
			cfg.NodePortAddresses = tc.cidrs
			startDaemon(t, cfg, log, deps)
			poll.Until(t, waitLimit, "the health check opened", func() (bool, string) {
				mu.Lock()
				defer mu.Unlock()
				return len(opened) > 0, ""
			})
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(opened, []string{tc.want}) {
				t.Errorf("health check listened on %q, want %q", opened, tc.want)
			}
		})
	}
}
