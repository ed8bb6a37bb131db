package daemon

import (
	"maps"
	"slices"
	"time"

	"github.com/kipvs/kipvs/internal/dataplane"
	"github.com/kipvs/kipvs/internal/debugapi"
	"github.com/kipvs/kipvs/internal/ipvsmode"
	"github.com/kipvs/kipvs/internal/proxy"
	"github.com/kipvs/kipvs/internal/reconcile"
)

// State is the metrics server's read-only /debug/kipvs/state document: the kernel state
// the daemon wants, per family, and the real servers it is draining. It is taken between
// syncs (under the sync lock), so it describes what the last sync applied.
func (d *Daemon) State() debugapi.State {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := debugapi.State{
		Dummy:          ipvsmode.DummyName,
		FilterBackend:  string(d.cfg.Kipvs.FilterBackend),
		GracefulPeriod: d.cfg.Kipvs.GracefulPeriod.String(),
		Schedulers:     maps.Clone(d.schedulers),
		ServiceCIDRs:   []string{},
		Families:       []debugapi.FamilyState{},
	}
	if d.deps.Source != nil {
		for _, p := range d.deps.Source.ServiceCIDRs().CIDRs {
			st.ServiceCIDRs = append(st.ServiceCIDRs, p.String())
		}
	}
	for _, f := range d.families {
		fs := debugapi.FamilyState{Family: f.ipFamily.String(), Addresses: []string{}, Sets: []debugapi.SetState{},
			VirtualServers: []debugapi.VirtualServer{}, Draining: []debugapi.DrainingRealServer{}}
		if !f.rec.NeedsFull() || d.ready {
			// f.opts is set by the first full sync; before it there is nothing to show.
			fs = FamilyState(f.kernel.Filter, f.desired, &f.opts, f.rec.Draining())
		}
		fs.Synced = !f.rec.NeedsFull()
		fs.Capacity = d.capacity(f)
		for _, o := range f.rec.Failed() {
			fs.Failed = append(fs.Failed, debugapi.FailedObject{Kind: string(o.Key.Kind), Object: o.Key.Name(),
				Error: o.Err.Error(), Attempts: o.Attempts, RetryAt: o.RetryAt.UTC()})
		}
		st.Families = append(st.Families, fs)
	}
	return st
}

// FamilyState renders one family's desired state (d built under po) and its draining real
// servers as the state document shows them, the sets and rules as the family's dataplane
// names and writes them. Synced is left false.
func FamilyState(filter dataplane.Filter, d *proxy.Desired, po *proxy.Options, draining map[reconcile.DrainKey]time.Time) debugapi.FamilyState {
	fs := debugapi.FamilyState{
		Family:         d.Family().String(),
		Addresses:      []string{},
		Sets:           []debugapi.SetState{},
		VirtualServers: []debugapi.VirtualServer{},
		Draining:       []debugapi.DrainingRealServer{},
	}
	for _, a := range d.Addresses() {
		fs.Addresses = append(fs.Addresses, a.String())
	}
	bySet := map[proxy.Set][]string{}
	for _, m := range d.Members() {
		bySet[m.Set] = append(bySet[m.Set], filter.MemberString(m))
	}
	for _, set := range filter.Sets() {
		members := bySet[set.Set]
		if members == nil {
			members = []string{}
		}
		slices.Sort(members) // by their text
		fs.Sets = append(fs.Sets, debugapi.SetState{Name: set.Name, Type: set.Type, Members: members})
	}
	for _, v := range d.VirtualServers() {
		fs.VirtualServers = append(fs.VirtualServers, debugapi.VirtualServer{
			Protocol: v.Protocol.Name(), Address: v.Address.String(), Port: v.Port,
			Kind: v.Kind.String(), Namespace: v.Owner.Namespace, Name: v.Owner.Name, PortName: v.Owner.Port,
			Destinations: len(v.Destinations),
		})
	}
	fs.Rules = filter.Rules(proxy.BuildFilter(po, d)).String()
	keys := slices.SortedFunc(maps.Keys(draining), func(a, b reconcile.DrainKey) int {
		if c := a.VS.Compare(b.VS); c != 0 {
			return c
		}
		return a.Dest.Compare(b.Dest)
	})
	for _, k := range keys {
		fs.Draining = append(fs.Draining, debugapi.DrainingRealServer{
			Protocol: k.VS.Protocol.Name(), Address: k.VS.Address.String(), Port: k.VS.Port,
			RealServer: k.Dest.String(), Since: draining[k].UTC(),
		})
	}
	return fs
}

// capacity is the Capacity part of family f's state document.
func (d *Daemon) capacity(f *family) *debugapi.Capacity {
	c := &debugapi.Capacity{NotProgrammed: d.notProgrammed(f), Budgets: []debugapi.Budget{}}
	if f.desired == nil {
		return c
	}
	for _, b := range f.desired.Budgets() {
		c.Budgets = append(c.Budgets, debugapi.Budget{Name: b.Name, Used: b.Used, Limit: b.Limit, TopNamespace: b.TopNamespace, TopUsed: b.TopUsed})
	}
	return c
}
