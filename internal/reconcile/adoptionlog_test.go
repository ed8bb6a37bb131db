package reconcile

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	v1 "k8s.io/api/core/v1"

	"github.com/kipvs/kipvs/internal/dataplane/iptables"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvs"
)

// A node switched from another proxy: the first full sync logs, at debug level (-v 1), the
// whole adoption plan (one change per line, a log line per step that changed something) and the iptables chains it rewrites, so an
// operator or a test can see exactly what kipvs changed of what it found. Later syncs, and
// an adoption that changes nothing, log no plan; at the default level nothing is added.
func TestAdoptionPlanLogged(t *testing.T) {
	for _, level := range []zapcore.Level{zapcore.DebugLevel, zapcore.InfoLevel} {
		t.Run(level.String(), func(t *testing.T) {
			core, logs := observer.New(level)
			// What the previous proxy left: web programmed as kipvs wants it.
			prev := newEnv(t)
			prev.set(svc("web", "10.96.0.10"), eps("web", v1.ProtocolTCP, 8080, "10.244.1.5", "10.244.2.6"))
			prev.full()

			// kipvs starts on that kernel, which differs in one weight and one rule.
			key := ipvs.ServiceKey{Family: inet.IPv4, Protocol: inet.TCP, Addr: netip.MustParseAddr("10.96.0.10"), Port: 80}
			if err := prev.ipvs.UpdateDestination(key, ipvs.Destination{Addr: netip.MustParseAddr("10.244.2.6"), Port: 8080, Weight: 2}); err != nil {
				t.Fatal(err)
			}
			if err := prev.nf.Restore("*nat\n-D KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0\nCOMMIT\n"); err != nil {
				t.Fatal(err)
			}
			e := newEnv(t, func(o *Options) { o.Logger = zap.New(core) })
			e.ipvs, e.ipset, e.nf, e.dummy, e.ct = prev.ipvs, prev.ipset, prev.nf, prev.dummy, prev.ct
			e.rec = New(Kernel{IPVS: e.ipvs, Filter: iptables.New(e.rec.opts.Family, e.ipset, e.nf), Dummy: e.dummy, Conntrack: e.ct}, e.rec.opts)
			e.set(svc("web", "10.96.0.10"), eps("web", v1.ProtocolTCP, 8080, "10.244.1.5", "10.244.2.6"))

			res := e.full()
			wantPlan := "update rs tcp/10.96.0.10:80 -> 10.244.2.6:8080 w=1\napply iptables rules\n"
			if got := res.Plan.String(); got != wantPlan {
				t.Fatalf("adoption plan:\n%s\nwant:\n%s", got, wantPlan)
			}
			plans := logs.FilterMessage("adoption plan").All()
			if level > zapcore.DebugLevel {
				if len(plans) != 0 {
					t.Errorf("adoption plan logged at level %s: %v", level, plans)
				}
				if n := logs.FilterMessage("adopting existing kernel state").Len(); n != 1 {
					t.Errorf("%d adoption summaries logged, want 1", n)
				}
				return
			}
			// One line per step that changed something, the rules last.
			if len(plans) == 0 {
				t.Fatal("no adoption plan logged")
			}
			var logged strings.Builder
			for _, p := range plans {
				s, _ := p.ContextMap()["plan"].(string)
				logged.WriteString(strings.TrimSuffix(s, "\n") + "\n")
			}
			if got := logged.String(); got != wantPlan {
				t.Errorf("logged plan %q, want %q", got, wantPlan)
			}
			fields := plans[len(plans)-1].ContextMap()
			wantRules := []string{`nat: chain KUBE-POSTROUTING: rule 2 is "-m comment --comment \"kubernetes service traffic requiring SNAT\" -j MASQUERADE", want "-j MARK --set-xmark 0x4000/0x0"`}
			rules, _ := fields["rules"].([]any)
			var got []string
			for _, r := range rules {
				s, _ := r.(string)
				got = append(got, s)
			}
			if !slices.Equal(got, wantRules) {
				t.Errorf("logged rules %q, want %q", got, wantRules)
			}

			// Adopted: the next full sync changes nothing and logs no plan.
			if res := e.full(); !res.Plan.Empty() {
				t.Errorf("second full sync: %s", res.Plan)
			}
			if n := logs.FilterMessage("adoption plan").Len(); n != len(plans) {
				t.Errorf("%d adoption plan lines logged in all, want %d (the adoption's)", n, len(plans))
			}
		})
	}
}
