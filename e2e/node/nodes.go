package node

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/kipvs/kipvs/e2e/vm"
)

// vmNode is one node of the run: its identity on the link and its VM while it runs.
type vmNode struct {
	name    string
	ip      net.IP
	tap     string
	mac     string
	podCIDR string // this node's /24 of Config.PodCIDR, set on its Node before the kubelet registers
	logs    string // the artifacts directory name under the state directory

	stop   chan struct{} // closed to ask the node script to stop; nil once the VM ended
	done   chan error
	cancel context.CancelFunc // kills the VM (its qemu) when it does not stop on request
	out    *vm.SyncBuffer     // the console while the VM runs
	output string             // the node script's whole output, once done has been received
}

// kubeletCert is the PKI name of the node's kubelet client certificate.
func (n *vmNode) kubeletCert() string { return "kubelet-" + n.name }

// MaxNodes bounds Config.Nodes: each node is a TCG VM on this machine's cores.
const MaxNodes = 4

// planNodes derives the nodes of a run from its Config: node 1 is NodeName at NodeIP (on the
// tap Tap when it is alone); node i (from 2) is named like node 1 with its number, at the
// i-th address from NodeIP, on the tap Tap-i, with Tap the bridge. Each gets the i-th /24 of
// PodCIDR.
func planNodes(c Config) ([]*vmNode, error) {
	if c.Nodes < 1 || c.Nodes > MaxNodes {
		return nil, fmt.Errorf("%d nodes: want 1 to %d", c.Nodes, MaxNodes)
	}
	pods, err := netip.ParsePrefix(c.PodCIDR)
	if err != nil || !pods.Addr().Is4() || pods.Bits() > 24-bitsFor(c.Nodes) {
		return nil, fmt.Errorf("pod CIDR %q: want an IPv4 prefix with room for %d /24s", c.PodCIDR, c.Nodes)
	}
	base := pods.Masked().Addr().As4()
	nodeIP, ok := netip.AddrFromSlice(c.NodeIP.To4())
	if !ok {
		return nil, fmt.Errorf("node IP %v: want IPv4", c.NodeIP)
	}
	link := netip.PrefixFrom(nodeIP, c.Prefix).Masked()
	stem := strings.TrimSuffix(c.NodeName, "-1")
	var nodes []*vmNode
	for i := range c.Nodes {
		n := &vmNode{name: c.NodeName, tap: c.Tap, mac: fmt.Sprintf("52:54:00:6b:69:%02x", i+1), logs: "node-logs"}
		if c.Nodes > 1 {
			n.tap = fmt.Sprintf("%s-%d", c.Tap, i+1)
		}
		if i > 0 {
			n.name = fmt.Sprintf("%s-%d", stem, i+1)
			n.logs = "node-logs-" + n.name
		}
		addr := nodeIP
		for range i {
			addr = addr.Next()
		}
		if host, _ := netip.AddrFromSlice(c.HostIP.To4()); !link.Contains(addr) || addr == host {
			return nil, fmt.Errorf("node %s's address %s: not a free address of the link %s", n.name, addr, link)
		}
		n.ip = net.IP(addr.AsSlice())
		cidr := base
		cidr[2] += byte(i)
		n.podCIDR = netip.PrefixFrom(netip.AddrFrom4(cidr), 24).String()
		nodes = append(nodes, n)
	}
	if len(nodes[len(nodes)-1].tap) > 15 {
		return nil, fmt.Errorf("tap name %s: longer than 15 characters (shorten --tap)", nodes[len(nodes)-1].tap)
	}
	return nodes, nil
}

// bitsFor is how many prefix bits n /24s need.
func bitsFor(n int) int {
	b := 0
	for 1<<b < n {
		b++
	}
	return b
}

// nodeObjects renders the Node objects the run creates before the kubelets register: each
// with its pod CIDR, so the routes between the nodes (and from the host) are known before
// any VM boots, and a zone of its own (zone-1, zone-2, ...; the topology and traffic
// distribution tests need nodes in two zones). The kubelet adopts an existing Node (adding
// its own labels and its status, leaving a zone it has none of), and the
// controller-manager's allocator takes a set podCIDR as allocated.
func nodeObjects(nodes []*vmNode) []byte {
	var b strings.Builder
	for i, n := range nodes {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: Node\nmetadata:\n  name: %s\n  labels:\n    topology.kubernetes.io/zone: zone-%d\nspec:\n  podCIDR: %s\n  podCIDRs:\n  - %s\n", n.name, i+1, n.podCIDR, n.podCIDR)
	}
	return []byte(b.String())
}

// peerRoutes is NODE_ROUTES for node n: every other node's pod CIDR via that node.
func peerRoutes(nodes []*vmNode, n *vmNode) string {
	var rs []string
	for _, o := range nodes {
		if o != n {
			rs = append(rs, o.podCIDR+"="+o.ip.String())
		}
	}
	return strings.Join(rs, " ")
}

// createNodes creates the run's Node objects (nodeObjects).
func (r *runner) createNodes(ctx context.Context) error {
	out, err := r.kubectlRun(ctx, time.Minute, nodeObjects(r.nodes), "create", "-f", "-")
	if err != nil {
		return err
	}
	r.logf("created the Node objects with their pod CIDRs: %s", strings.Join(strings.Fields(out), " "))
	return nil
}

// vmEnded returns, without waiting, the error of a node whose VM has ended (a VM that ends
// before teardown is a failure even when its script exited 0).
func (r *runner) vmEnded() error {
	for _, n := range r.nodes {
		if n.stop == nil || n.done == nil {
			continue
		}
		select {
		case err := <-n.done:
			n.stop = nil
			if err == nil {
				err = fmt.Errorf("the VM of %s ended:\n%s", n.name, tailLines(n.output, 40))
			}
			return err
		default:
		}
	}
	return nil
}
