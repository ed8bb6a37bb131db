package reconcile

import (
	"maps"
	"net/netip"
	"slices"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/ipvsmode"
	"github.com/kipvs/kipvs/internal/proxy"
)

// vsState is one owned virtual server as the kernel holds it.
type vsState struct {
	svc   ipvs.Service // key and settings (stats ignored)
	dests map[netip.AddrPort]destState
}

type destState struct {
	weight int
	// active and inactive connection counts, known only right after a kernel read.
	active, inactive uint32
}

// state is what kipvs owns in the kernel for one family.
type state struct {
	vs      map[proxy.VSKey]*vsState
	members map[proxy.Member]struct{}
	addrs   map[netip.Addr]struct{}
}

func newState() *state {
	return &state{vs: map[proxy.VSKey]*vsState{}, members: map[proxy.Member]struct{}{}, addrs: map[netip.Addr]struct{}{}}
}

// vsKey converts between the proxy's key and the IPVS adapter's.
func toIPVSKey(k proxy.VSKey) ipvs.ServiceKey {
	return ipvs.ServiceKey{Family: inet.FamilyOf(k.Address), Protocol: k.Protocol, Addr: k.Address, Port: k.Port}
}

func fromIPVSKey(k ipvs.ServiceKey) proxy.VSKey {
	return proxy.VSKey{Protocol: k.Protocol, Address: k.Addr.Unmap(), Port: k.Port}
}

// toIPVSService renders a desired virtual server as the adapter's Service.
func toIPVSService(v *proxy.VirtualServer) ipvs.Service {
	s := ipvs.Service{ServiceKey: toIPVSKey(v.VSKey), Scheduler: v.Scheduler}
	s.Netmask = ipvs.FullNetmask(s.Family)
	if v.Persistent {
		s.Flags |= ipvs.FlagPersistent
		s.Timeout = v.Timeout
	}
	for _, f := range v.SchedFlags {
		switch f {
		case ipvsmode.FlagSHFallback, ipvsmode.FlagMHFallback:
			s.Flags |= ipvs.FlagSched1
		case ipvsmode.FlagSHPort, ipvsmode.FlagMHPort:
			s.Flags |= ipvs.FlagSched2
		}
	}
	return s
}

// serviceSettingsEqual compares what UpdateService can change: every field of the two
// services as the kernel keeps them (settingsOf), so a field added to ipvs.Service is
// compared unless settingsOf clears it.
func serviceSettingsEqual(a, b ipvs.Service) bool { return settingsOf(a) == settingsOf(b) }

// settingsOf clears what is not a setting and normalizes what the kernel normalizes: the
// key (the callers compare services of one key), the counters, the hashed flag (the kernel
// reports it on every service; it is not ours to set), the timeout of a service that is not
// persistent (meaningless) and a zero netmask (the full mask).
func settingsOf(s ipvs.Service) ipvs.Service {
	if s.Netmask == 0 {
		s.Netmask = ipvs.FullNetmask(s.Family)
	}
	if s.Flags&ipvs.FlagPersistent == 0 {
		s.Timeout = 0
	}
	s.Flags &^= ipvs.FlagHashed
	s.ServiceKey, s.Stats = ipvs.ServiceKey{}, nil
	return s
}

// clone returns a deep copy.
func (v *vsState) clone() *vsState {
	return &vsState{svc: v.svc, dests: maps.Clone(v.dests)}
}

// clone returns a deep copy (for tests and snapshots).
func (s *state) clone() *state {
	c := newState()
	for k, v := range s.vs {
		c.vs[k] = v.clone()
	}
	for m := range s.members {
		c.members[m] = struct{}{}
	}
	for a := range s.addrs {
		c.addrs[a] = struct{}{}
	}
	return c
}

func sortedKeys[K comparable, V any](m map[K]V, cmp func(K, K) int) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.SortFunc(out, cmp)
	return out
}
