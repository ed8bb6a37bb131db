package svcstats

import (
	"net/netip"

	"github.com/kipvs/kipvs/internal/debugapi"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvs"
)

// scrapePlan is what a scrape derives from the virtual servers kipvs programs alone: which
// group (Service port, family, VIP kind) each virtual server counts in, the groups' label
// values, and for the text path their order and written label lists. It stays the same
// while the virtual servers do (not their real servers), so a scrape of a node whose
// Services did not change reuses it: then a scrape costs the service dump and the values,
// not parsing 10,000 addresses, sorting 10,000 label sets and escaping their labels. A
// plan is never changed once built; snapshots share it.
type scrapePlan struct {
	vss    []debugapi.VirtualServer // what it was built from
	byKey  map[ipvs.ServiceKey]int  // virtual server -> group
	labels [][]string               // per group: serviceLabels' values
	// order is the groups whose label values are all UTF-8, sorted as the text path writes
	// them; lists holds each group's three label lists (plain, direction in, out) as
	// written, list k of group g at lists[bounds[g][k]:bounds[g][k+1]].
	order []int
	lists []byte
	// beyond is the groups with valid labels past the limit of Service label sets
	// (Options.MaxServices), in label order: not exported, counted when in the kernel.
	beyond []int
	bounds [][4]int
}

// samePlanInput reports whether a and b list the same virtual servers in the same order,
// their real server counts aside.
func samePlanInput(a, b []debugapi.VirtualServer) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		x.Destinations, y.Destinations = 0, 0
		if x != y {
			return false
		}
	}
	return true
}

// planFor returns the plan for vss: the last one if vss lists the same virtual servers,
// else a new one (kept for the next scrape). Called by the one read in flight.
func (c *Collector) planFor(vss []debugapi.VirtualServer) *scrapePlan {
	c.mu.Lock()
	p := c.plan
	c.mu.Unlock()
	if p != nil && samePlanInput(p.vss, vss) {
		return p
	}
	p = c.newPlan(vss)
	c.mu.Lock()
	c.plan = p
	c.plansBuilt++
	c.mu.Unlock()
	return p
}

func (c *Collector) newPlan(vss []debugapi.VirtualServer) *scrapePlan {
	// Most Service ports have one virtual server: size for that.
	p := &scrapePlan{vss: vss, byKey: make(map[ipvs.ServiceKey]int, len(vss)), labels: make([][]string, 0, len(vss))}
	groups := make(map[groupKey]int, len(vss))
	for _, v := range vss {
		proto, ok := protocols[v.Protocol]
		if !ok {
			continue
		}
		addr, err := netip.ParseAddr(v.Address)
		if err != nil {
			continue
		}
		addr = addr.Unmap()
		k := ipvs.ServiceKey{Family: inet.FamilyOf(addr), Protocol: proto, Addr: addr, Port: v.Port}
		gk := groupKey{namespace: v.Namespace, name: v.Name, port: v.PortName, protocol: v.Protocol, kind: v.Kind, family: k.Family}
		gi, ok := groups[gk]
		if !ok {
			gi = len(p.labels)
			groups[gk] = gi
			p.labels = append(p.labels, []string{v.Namespace, v.Name, v.PortName, v.Protocol, k.Family.String(), vipKind(v.Kind)})
		}
		p.byKey[k] = gi
	}
	sets := make([]textSet, 0, len(p.labels))
	for gi, labels := range p.labels {
		if c.validLabels(labels) {
			sets = append(sets, textSet{labels: labels, group: gi})
		}
	}
	sortTextSets(sets, &c.svcLayout.plain)
	if len(sets) > c.opts.MaxServices {
		for _, ts := range sets[c.opts.MaxServices:] {
			p.beyond = append(p.beyond, ts.group)
		}
		sets = sets[:c.opts.MaxServices]
	}
	p.order = make([]int, len(sets))
	p.bounds = make([][4]int, len(p.labels))
	for i := range sets {
		gi := sets[i].group
		p.order[i] = gi
		p.bounds[gi][0] = len(p.lists)
		for k := range 3 {
			p.lists = appendSetLabels(p.lists, &c.svcLayout, sets[i].labels, k)
			p.bounds[gi][k+1] = len(p.lists)
		}
	}
	return p
}

// list is group g's label list k, as written.
func (p *scrapePlan) list(g, k int) []byte {
	return p.lists[p.bounds[g][k]:p.bounds[g][k+1]]
}
