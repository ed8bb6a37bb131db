package node

import (
	"fmt"
	"net"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// Each node gets its own name, address, tap, MAC and /24 of the pod network; with one node the
// link is the tap itself, as before two nodes existed.
func TestPlanNodes(t *testing.T) {
	c := Config{Tap: DefaultTap, NodeName: DefaultNodeName, PodCIDR: DefaultPodCIDR, Prefix: 24,
		HostIP: net.ParseIP("192.168.123.1"), NodeIP: net.ParseIP("192.168.123.2")}
	describe := func(nodes []*vmNode) string {
		var b strings.Builder
		for _, n := range nodes {
			b.WriteString(strings.Join([]string{n.name, n.ip.String(), n.tap, n.mac, n.podCIDR, n.logs, n.kubeletCert()}, " ") + "\n")
		}
		return b.String()
	}
	c.Nodes = 1
	one, err := planNodes(c)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := describe(one), "node-1 192.168.123.2 kipvs-node0 52:54:00:6b:69:01 10.244.0.0/24 node-logs kubelet-node-1\n"; got != want {
		t.Errorf("one node:\n%swant:\n%s", got, want)
	}
	c.Nodes = 2
	two, err := planNodes(c)
	if err != nil {
		t.Fatal(err)
	}
	want := "node-1 192.168.123.2 kipvs-node0-1 52:54:00:6b:69:01 10.244.0.0/24 node-logs kubelet-node-1\n" +
		"node-2 192.168.123.3 kipvs-node0-2 52:54:00:6b:69:02 10.244.1.0/24 node-logs-node-2 kubelet-node-2\n"
	if got := describe(two); got != want {
		t.Errorf("two nodes:\n%swant:\n%s", got, want)
	}
	if got, want := peerRoutes(two, two[0]), "10.244.1.0/24=192.168.123.3"; got != want {
		t.Errorf("node-1's routes %q, want %q", got, want)
	}
	if got, want := peerRoutes(two, two[1]), "10.244.0.0/24=192.168.123.2"; got != want {
		t.Errorf("node-2's routes %q, want %q", got, want)
	}
	if got := peerRoutes(one, one[0]); got != "" {
		t.Errorf("a lone node's routes %q, want none", got)
	}
	objs := string(nodeObjects(two))
	for _, w := range []string{"name: node-2\n  labels:\n    topology.kubernetes.io/zone: zone-2\nspec:\n  podCIDR: 10.244.1.0/24\n  podCIDRs:\n  - 10.244.1.0/24\n", "name: node-1\n  labels:\n    topology.kubernetes.io/zone: zone-1\nspec:\n  podCIDR: 10.244.0.0/24\n"} {
		if !strings.Contains(objs, w) {
			t.Errorf("Node objects lack %q:\n%s", w, objs)
		}
	}

	for i, doc := range strings.Split(strings.TrimPrefix(objs, "---\n"), "---\n") {
		var n corev1.Node
		if err := yaml.UnmarshalStrict([]byte(doc), &n); err != nil {
			t.Fatalf("Node object %d: %v\n%s", i, err, doc)
		}
		if n.Name != two[i].name || n.Spec.PodCIDR != two[i].podCIDR || len(n.Spec.PodCIDRs) != 1 ||
			n.Labels["topology.kubernetes.io/zone"] != fmt.Sprintf("zone-%d", i+1) {
			t.Errorf("Node object %d: %+v", i, n)
		}
	}

	for _, tc := range []struct {
		name string
		mut  func(*Config)
		want string
	}{
		{"no node", func(c *Config) { c.Nodes = 0 }, "want 1 to"},
		{"too many", func(c *Config) { c.Nodes = MaxNodes + 1 }, "want 1 to"},
		{"pod CIDR too small", func(c *Config) { c.Nodes = 2; c.PodCIDR = "10.244.0.0/24" }, "room for 2 /24s"},
		{"IPv6 pod CIDR", func(c *Config) { c.PodCIDR = "fd00::/48" }, "IPv4 prefix"},
		{"node past the link", func(c *Config) { c.Nodes = 2; c.NodeIP = net.ParseIP("192.168.123.255") }, "not a free address"},
		{"node on the host's address", func(c *Config) { c.Nodes = 2; c.HostIP = net.ParseIP("192.168.123.3") }, "not a free address"},
		{"tap name too long", func(c *Config) { c.Nodes = 2; c.Tap = "kipvs-node0-abc" }, "longer than 15"},
	} {
		c := c
		c.Nodes = 1
		tc.mut(&c)
		if _, err := planNodes(c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one with %q", tc.name, err, tc.want)
		}
	}
}
