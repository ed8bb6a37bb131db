package proxy_test

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/kipvs/kipvs/internal/conntrack/conntracktest"
	"github.com/kipvs/kipvs/internal/dataplane/iptables"
	"github.com/kipvs/kipvs/internal/dummyif/dummyiftest"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipset/ipsettest"
	"github.com/kipvs/kipvs/internal/ipvs/ipvstest"
	"github.com/kipvs/kipvs/internal/netfilter/netfiltertest"
	"github.com/kipvs/kipvs/internal/proxy"
	"github.com/kipvs/kipvs/internal/reconcile"
)

// An incremental sync from any state to any other must end where a full sync of the other
// state ends: the same desired state, every changed object touched, the same kernel. The
// daemon decides with Options.Equal whether a change of options needs a full rebuild, with
// VirtualServer.Equal which virtual servers a Service change touched, and the reconciler
// with its settings comparison whether a virtual server needs an update; a comparison that
// misses a field makes some move below end elsewhere.
//
// A world is one family's options and Services: three background Services that stay the
// same (so a change of options alone meets Services that did not change) and one build
// case's Service. One tour walks every ordered pair of build cases (options included, each
// case to itself too); then, for every build case, one tour walks every ordered pair of
// settings of its Service's session affinity, affinity timeout, scheduler and scheduler
// flags, and a star goes from the case's options to each option changed alone and back (a
// change of options is a full rebuild; pairs of changed options add nothing to that).
func TestIncrementalEqualsFullOverBuildCasePairs(t *testing.T) {
	cases := proxy.BuildCases()
	for _, fam := range []inet.Family{inet.IPv4, inet.IPv6} {
		var worlds []world
		for _, c := range cases {
			if c.Opts.Family == fam {
				worlds = append(worlds, caseWorld(c.Name, c.Opts, c.Input))
			}
		}
		t.Run("cases/"+fam.String(), func(t *testing.T) {
			t.Parallel()
			walk(t, fam, worlds, tour(len(worlds)))
		})
	}
	for _, c := range cases {
		t.Run("knobs/"+c.Name, func(t *testing.T) {
			t.Parallel()
			var services []world
			for _, k := range serviceKnobs() {
				in := c.Input
				in.Service = in.Service.DeepCopy()
				k.set(in.Service)
				services = append(services, caseWorld(c.Name+"+"+k.name, c.Opts, in))
			}
			walk(t, c.Opts.Family, services, tour(len(services)))
			options := []world{caseWorld(c.Name, c.Opts, c.Input)}
			for _, k := range optionKnobs() {
				o := c.Opts
				k.set(&o)
				options = append(options, caseWorld(c.Name+"+"+k.name, o, c.Input))
			}
			walk(t, c.Opts.Family, options, star(len(options)))
		})
	}
}

// world is everything one family's proxier builds from.
type world struct {
	name   string
	opts   proxy.Options
	inputs map[types.NamespacedName]proxy.ServiceInput
}

func caseWorld(name string, o proxy.Options, in proxy.ServiceInput) world {
	w := world{name: name, opts: o, inputs: background(o.Family)}
	w.inputs[types.NamespacedName{Namespace: in.Service.Namespace, Name: in.Service.Name}] = in
	return w
}

// knob is one setting of what the change detection compares.
type knob[T any] struct {
	name string
	set  func(T)
}

func serviceKnobs() []knob[*v1.Service] {
	affinity := func(timeout int32) func(*v1.Service) {
		return func(s *v1.Service) {
			s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
			s.Spec.SessionAffinityConfig = nil
			if timeout > 0 {
				s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To(timeout)}}
			}
		}
	}
	scheduler := func(name, flags string) func(*v1.Service) {
		return func(s *v1.Service) {
			if s.Annotations == nil {
				s.Annotations = map[string]string{}
			}
			s.Annotations[proxy.AnnotationScheduler] = name
			s.Annotations[proxy.AnnotationSchedulerFlags] = flags
		}
	}
	return []knob[*v1.Service]{
		{"as-is", func(*v1.Service) {}},
		{"affinity-default-timeout", affinity(0)},
		{"affinity-60s", affinity(60)},
		{"affinity-120s", affinity(120)},
		{"affinity-max-timeout", affinity(86400)},
		{"sh-port", scheduler("sh", "sh-port")},
		{"sh-fallback-port", scheduler("sh", "sh-fallback,sh-port")},
		{"mh-port-affinity-60s", func(s *v1.Service) { scheduler("mh", "mh-port")(s); affinity(60)(s) }},
	}
}

func optionKnobs() []knob[*proxy.Options] {
	return []knob[*proxy.Options]{
		{"global-lc", func(o *proxy.Options) { o.Scheduler = "lc" }},
		{"sh-unavailable", func(o *proxy.Options) { o.UnavailableSchedulers = []string{"sh"} }},
		{"masquerade-all", func(o *proxy.Options) { o.MasqueradeAll = true }},
		{"masquerade-bit-13", func(o *proxy.Options) { o.MasqueradeBit = 13 }},
		{"random-fully", func(o *proxy.Options) { o.MasqueradeRandomFully = true }},
		{"strict-arp", func(o *proxy.Options) { o.StrictARP = true }},
		{"zone-b", func(o *proxy.Options) { o.NodeLabels = map[string]string{proxy.ZoneLabel: "zone-b"} }},
		{"node-b", func(o *proxy.Options) { o.NodeName = "node-b" }},
		{"bridge-detector", func(o *proxy.Options) {
			o.LocalDetector = proxy.LocalDetector{Mode: proxy.LocalBridgeInterface, Interface: "cbr0"}
		}},
	}
}

// background is three Services every world has: topology hints (node labels), Local
// traffic policy with affinity on a node port (node name, node addresses) and a scheduler
// by annotation (unavailable schedulers).
func background(f inet.Family) map[types.NamespacedName]proxy.ServiceInput {
	addr := func(v4, v6 string) string {
		if f == inet.IPv6 {
			return v6
		}
		return v4
	}
	type ep struct{ addr, node, zone string }
	build := func(name, clusterIP string, mod func(*v1.Service), eps ...ep) proxy.ServiceInput {
		s := &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "bg", Name: name},
			Spec: v1.ServiceSpec{
				Type: v1.ServiceTypeClusterIP, ClusterIP: clusterIP, ClusterIPs: []string{clusterIP},
				Ports: []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}},
			},
		}
		mod(s)
		sl := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "bg", Name: name + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
			AddressType: discoveryv1.AddressType(addr(string(discoveryv1.AddressTypeIPv4), string(discoveryv1.AddressTypeIPv6))),
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}},
		}
		for _, e := range eps {
			x := discoveryv1.Endpoint{Addresses: []string{e.addr}, NodeName: ptr.To(e.node)}
			if e.zone != "" {
				x.Hints = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: e.zone}}}
			}
			x.Zone = ptr.To(e.zone)
			sl.Endpoints = append(sl.Endpoints, x)
		}
		return proxy.ServiceInput{Service: s, Slices: []*discoveryv1.EndpointSlice{sl}}
	}
	one, two := addr("10.244.200.5", "fd00:10:244::c8:5"), addr("10.244.200.6", "fd00:10:244::c8:6")
	out := map[types.NamespacedName]proxy.ServiceInput{}
	for _, in := range []proxy.ServiceInput{
		build("topology", addr("10.96.200.1", "fd00::c8:1"), func(s *v1.Service) {
			s.Annotations = map[string]string{v1.AnnotationTopologyMode: "Auto"}
		}, ep{one, "node-a", "zone-a"}, ep{two, "node-b", "zone-b"}),
		build("local-sticky", addr("10.96.200.2", "fd00::c8:2"), func(s *v1.Service) {
			s.Spec.Type = v1.ServiceTypeNodePort
			s.Spec.Ports[0].NodePort = 30999
			s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
			s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
			s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](30)}}
		}, ep{one, "node-a", ""}, ep{two, "node-b", ""}),
		build("sh", addr("10.96.200.3", "fd00::c8:3"), func(s *v1.Service) {
			s.Annotations = map[string]string{proxy.AnnotationScheduler: "sh", proxy.AnnotationSchedulerFlags: "sh-port"}
		}, ep{one, "node-b", ""}, ep{two, "node-b", ""}),
	} {
		out[types.NamespacedName{Namespace: "bg", Name: in.Service.Name}] = in
	}
	return out
}

// walk moves one proxier along route (indices into worlds) and, after each move, compares
// it with a fresh proxier that made one full sync of the world moved to.
func walk(t *testing.T, fam inet.Family, worlds []world, route []int) {
	t.Helper()
	refs := make([]*reference, len(worlds))
	ref := func(i int) *reference {
		if refs[i] == nil {
			p := newProxier(t, fam)
			p.full(worlds[i])
			refs[i] = &reference{desired: desiredView(p.desired), kernel: p.dump()}
		}
		return refs[i]
	}
	p := newProxier(t, fam)
	p.full(worlds[route[0]])
	for step := 1; step < len(route); step++ {
		from, to := worlds[route[step-1]], worlds[route[step]]
		move := fmt.Sprintf("move %d, %s -> %s", step, from.name, to.name)
		before := snapshot(p.desired)
		touched := p.move(to)
		if !reflect.DeepEqual(p.opts, to.opts) {
			t.Fatalf("%s: the proxier kept options that differ from the current ones (Options.Equal called them equal; -current +kept):\n%s",
				move, lineDiff(fieldLines(to.opts), fieldLines(p.opts)))
		}
		want := ref(route[step])
		if got := desiredView(p.desired); got != want.desired {
			t.Fatalf("%s: desired state differs from a full build (-full +incremental):\n%s", move, lineDiff(want.desired, got))
		}
		if touched != nil && route[step] == route[step-1] && !touched.Empty() {
			t.Fatalf("%s: nothing changed, but touched %v", move, touched)
		}
		if touched != nil {
			if missed := untouched(before, snapshot(p.desired), touched); len(missed) > 0 {
				t.Fatalf("%s: changed but not touched:\n%s", move, strings.Join(missed, "\n"))
			}
		}
		if got := p.dump(); got != want.kernel {
			t.Fatalf("%s: kernel differs from a full sync (-full +incremental):\n%s", move, lineDiff(want.kernel, got))
		}
	}
}

type reference struct{ desired, kernel string }

func lineDiff(want, got string) string {
	return cmp.Diff(strings.Split(want, "\n"), strings.Split(got, "\n"))
}

// fieldLines renders a struct one field per line, for a line diff.
func fieldLines(x any) string {
	v := reflect.ValueOf(x)
	var b strings.Builder
	for i := range v.NumField() {
		fmt.Fprintf(&b, "%s: %+v\n", v.Type().Field(i).Name, v.Field(i))
	}
	return b.String()
}

// tour returns a closed walk over n nodes that takes every ordered pair (i, j), i == j
// included, exactly once: an Eulerian circuit of the complete digraph with loops.
func tour(n int) []int {
	next := make([]int, n)
	stack, out := []int{0}, []int{}
	for len(stack) > 0 {
		v := stack[len(stack)-1]
		if next[v] < n {
			stack = append(stack, next[v])
			next[v]++
			continue
		}
		out = append(out, v)
		stack = stack[:len(stack)-1]
	}
	slices.Reverse(out)
	return out
}

// star returns a walk from node 0 to every other node, to itself there, and back.
func star(n int) []int {
	out := []int{0, 0}
	for i := 1; i < n; i++ {
		out = append(out, i, i, 0)
	}
	return out
}

// proxier is one family's proxier as the daemon runs it, over fake kernels.
type proxier struct {
	t       *testing.T
	fam     inet.Family
	ipvs    *ipvstest.Fake
	ipset   *ipsettest.Fake
	nf      *netfiltertest.Fake
	dummy   *dummyiftest.Fake
	rec     *reconcile.Reconciler
	desired *proxy.Desired
	opts    proxy.Options
	inputs  map[types.NamespacedName]proxy.ServiceInput
}

func newProxier(t *testing.T, fam inet.Family) *proxier {
	nff := inet.IPv4
	if fam == inet.IPv6 {
		nff = inet.IPv6
	}
	p := &proxier{t: t, fam: fam, ipvs: ipvstest.NewFake(), ipset: ipsettest.NewFake(), nf: netfiltertest.NewFake(nff), dummy: dummyiftest.NewFake("kube-ipvs0")}
	// No graceful period: a removed real server goes at once rather than draining at weight 0
	// (graceful termination has its own tests), so the kernels compare.
	p.rec = reconcile.New(reconcile.Kernel{IPVS: p.ipvs, Filter: iptables.New(fam, p.ipset, p.nf), Dummy: p.dummy, Conntrack: conntracktest.NewFake()},
		reconcile.Options{Family: fam, Clock: clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))})
	return p
}

// full rebuilds everything and syncs it fully, as the daemon's full sync.
func (p *proxier) full(w world) {
	p.t.Helper()
	p.opts, p.inputs = w.opts, w.inputs
	p.desired = proxy.NewDesired(p.fam)
	for _, name := range slices.SortedFunc(maps.Keys(w.inputs), compareName) {
		p.desired.Update(name, proxy.BuildService(w.inputs[name], &p.opts), nil)
	}
	if _, err := p.rec.FullSync(context.Background(), p.desired, &p.opts); err != nil {
		p.t.Fatalf("full sync of %s: %v", w.name, err)
	}
}

// move goes to w as the daemon's sync does: a full sync when the options changed, else the
// Services rebuilt with the options it holds and an incremental sync of what they touched
// (returned; nil after a full sync). Every Service is rebuilt, changed or not.
func (p *proxier) move(w world) *proxy.Touched {
	p.t.Helper()
	if !p.opts.Equal(w.opts) {
		p.full(w)
		return nil
	}
	touched := proxy.NewTouched()
	for _, name := range slices.SortedFunc(maps.Keys(keys(p.inputs, w.inputs)), compareName) {
		var st *proxy.ServiceState
		if in, ok := w.inputs[name]; ok {
			st = proxy.BuildService(in, &p.opts)
		}
		p.desired.Update(name, st, touched)
	}
	p.inputs = w.inputs
	if _, err := p.rec.Sync(context.Background(), p.desired, &p.opts, touched); err != nil {
		p.t.Fatalf("incremental sync to %s: %v", w.name, err)
	}
	return touched
}

// dump is the whole fake kernel.
func (p *proxier) dump() string {
	p.t.Helper()
	var b strings.Builder
	for _, f := range []func() (string, error){
		p.ipvs.Dump, p.ipset.Dump, p.dummy.Dump, func() (string, error) { return p.nf.Dump(context.Background()) },
	} {
		s, err := f()
		if err != nil {
			p.t.Fatal(err)
		}
		b.WriteString(s)
		b.WriteString("\n--\n")
	}
	return b.String()
}

func compareName(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) }

// desiredView is everything a reader of a Desired sees.
func desiredView(d *proxy.Desired) string {
	var b strings.Builder
	b.WriteString(d.Dump())
	for _, k := range d.OutFilter() {
		fmt.Fprintf(&b, "out-filter %s\n", k)
	}
	for _, p := range d.Problems() {
		fmt.Fprintf(&b, "problem %s %s %s\n", p.Reason, p.Field, p)
	}
	owners := map[types.NamespacedName]bool{}
	for _, v := range d.VirtualServers() {
		owners[v.Owner.NamespacedName] = true
	}
	for _, p := range d.Problems() {
		owners[p.Service] = true
	}
	for _, n := range slices.SortedFunc(maps.Keys(owners), compareName) {
		if st := d.Service(n); st != nil {
			fmt.Fprintf(&b, "service %s hc=%d local=%d no-local=%v/%v\n", n, st.HealthCheckNodePort, st.LocalEndpoints, st.NoLocalInternal, st.NoLocalExternal)
		}
	}
	fmt.Fprintf(&b, "services %d\n", d.NumServices())
	return b.String()
}

// view is the kernel objects of a Desired, each as the reconciler would program it.
type view struct {
	vs      map[proxy.VSKey]string
	members map[proxy.Member]bool
	addrs   map[netip.Addr]bool
}

func snapshot(d *proxy.Desired) view {
	v := view{vs: map[proxy.VSKey]string{}, members: map[proxy.Member]bool{}, addrs: map[netip.Addr]bool{}}
	for _, x := range d.VirtualServers() {
		c := *x
		c.Kind = 0 // names the virtual server only; not kernel state
		v.vs[x.VSKey] = proxy.FormatVirtualServer(&c)
	}
	for _, m := range d.Members() {
		v.members[m] = true
	}
	for _, a := range d.Addresses() {
		v.addrs[a] = true
	}
	return v
}

// untouched lists the objects that differ between two views but are not in t.
func untouched(before, after view, t *proxy.Touched) []string {
	var out []string
	for k := range keys(before.vs, after.vs) {
		if _, ok := t.VirtualServers[k]; !ok && before.vs[k] != after.vs[k] {
			out = append(out, fmt.Sprintf("virtual server %s:\n%s->\n%s", k, before.vs[k], after.vs[k]))
		}
	}
	for m := range keys(before.members, after.members) {
		if _, ok := t.Members[m]; !ok && before.members[m] != after.members[m] {
			out = append(out, fmt.Sprintf("member %s %s", m.Set, m))
		}
	}
	for a := range keys(before.addrs, after.addrs) {
		if _, ok := t.Addresses[a]; !ok && before.addrs[a] != after.addrs[a] {
			out = append(out, fmt.Sprintf("address %s", a))
		}
	}
	slices.Sort(out)
	return out
}

func keys[K comparable, V any](a, b map[K]V) map[K]struct{} {
	out := map[K]struct{}{}
	for k := range a {
		out[k] = struct{}{}
	}
	for k := range b {
		out[k] = struct{}{}
	}
	return out
}
