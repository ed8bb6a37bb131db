package daemon

import (
	"maps"
	"net/netip"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kipvs/kipvs/internal/config"
	"github.com/kipvs/kipvs/internal/healthcheck"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/server"
	"github.com/kipvs/kipvs/internal/testutil/fieldguard"
	"github.com/kipvs/kipvs/internal/watch"
)

// guardNode is a Node with every field the proxy could read populated.
func guardNode() v1.Node {
	deleted := metav1.NewTime(time.Unix(1_700_000_000, 0))
	return v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-a", ResourceVersion: "7", DeletionTimestamp: &deleted,
			Labels:      map[string]string{v1.LabelTopologyZone: "zone-a", "kubernetes.io/hostname": "node-a"},
			Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0"}},
		Spec: v1.NodeSpec{PodCIDR: "10.244.1.0/24", PodCIDRs: []string{"10.244.1.0/24", "fd00:10:244:1::/64"},
			Taints: []v1.Taint{{Key: "ToBeDeletedByClusterAutoscaler", Effect: v1.TaintEffectNoSchedule}}},
		Status: v1.NodeStatus{
			Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.168.1.10"}, {Type: v1.NodeInternalIP, Address: "fd00::10"},
				{Type: v1.NodeExternalIP, Address: "203.0.113.10"}, {Type: v1.NodeHostName, Address: "node-a"}},
			Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, LastHeartbeatTime: deleted}},
		},
	}
}

// Every change of a Node that changes what the proxy derives from it (any family's
// options under each way of using the Node, and whether the node is eligible for load
// balancer health checks) is a change watch.NodeRelevantChange reports: otherwise that
// change would wait for the next periodic sync. The consumers are the oracle, so a field a
// new consumer reads is covered without a list to update.
func TestNodeRelevantChangeGuard(t *testing.T) {
	base := guardNode()
	muts, _ := fieldguard.Mutations(base) // unpopulated fields (capacity, images) are reported; they are not read
	cfgs := map[string]config.Config{}
	for _, mode := range []string{"ClusterCIDR", "NodeCIDR"} {
		for _, primary := range []bool{false, true} {
			c := testConfig(t)
			c.DetectLocalMode = config.LocalMode(mode)
			c.NodePortPrimary = primary
			cfgs[mode+map[bool]string{false: "", true: "+primary"}[primary]] = c
		}
	}
	host := []netip.Addr{netip.MustParseAddr("192.168.1.10"), netip.MustParseAddr("fd00::10")}
	eligible := func(n *v1.Node) bool {
		return server.NewHealth(nil, time.Minute, func() (*v1.Node, bool) { return n, true }, nil).NodeEligible()
	}
	checked := 0
	for _, m := range muts {
		var why string
		for name, cfg := range cfgs {
			for _, f := range []inet.Family{inet.IPv4, inet.IPv6} {
				a, b := buildOptions(&cfg, f, "node-a", &base, host), buildOptions(&cfg, f, "node-a", &m.Value, host)
				if !a.Equal(b) {
					why = "the " + f.String() + " options with " + name
				}
			}
		}
		if eligible(&base) != eligible(&m.Value) {
			why = "health check eligibility"
		}
		if why == "" {
			continue
		}
		checked++
		if !watch.NodeRelevantChange(&base, &m.Value) {
			t.Errorf("a change of Node %s changes %s but NodeRelevantChange does not report it", m.Path, why)
		}
	}
	if checked < 5 {
		t.Errorf("only %d Node changes reach a consumer: the base Node is not populated enough", checked)
	}
	// And heartbeats do not count.
	hb := base.DeepCopy()
	hb.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(time.Unix(1_700_000_100, 0))
	hb.ResourceVersion = "8"
	if watch.NodeRelevantChange(&base, hb) {
		t.Error("a status heartbeat is reported as a relevant change")
	}
}

// The health check servers are re-synced whenever a Service's wanted port or its local
// endpoint count changes (syncHealthChecks compares with healthChecksChanged).
func TestHealthChecksChangedGuard(t *testing.T) {
	base := map[types.NamespacedName]healthcheck.Service{{Namespace: "default", Name: "web"}: {Port: 30000, LocalEndpoints: 2}}
	fieldguard.Check(t, base, nil, func(a, b map[types.NamespacedName]healthcheck.Service) bool {
		return healthChecksChanged(maps.Clone(a), maps.Clone(b))
	})
}
