// Package ipvstest holds the in-memory fake of package ipvs's kernel adapter, for tests:
// it models the kernel's state, answers with the same typed errors and can fail at random
// (SetFaulty). Only tests import it, so it stays out of the kipvs binary.
package ipvstest

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"syscall"

	"github.com/kipvs/kipvs/internal/faulty"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/kerr"
)

// Schedulers the fake accepts: the kernel's schedulers (it loads ip_vs_<name> on demand
// and answers ENOENT when there is no such module) and "none".
var fakeSchedulers = []string{"rr", "wrr", "lc", "wlc", "lblc", "lblcr", "dh", "sh", "sed", "nq", "fo", "ovf", "mh", "twos", "none"}

// Persistence engines the fake accepts (the kernel has ip_vs_pe_sip).
var fakePEs = []string{"sip"}

// FaultFunc is consulted before every mutation of the fake (single calls and each op of
// Apply; not Flush or SetTimeouts). n counts mutations from 1. A non-nil result fails that
// mutation with the returned error (wrapped with the op's description) and changes nothing.
type FaultFunc func(n int, op ipvs.Op) error

// FailNth returns a FaultFunc that fails the nth mutation with err.
func FailNth(nth int, err error) FaultFunc {
	return func(n int, _ ipvs.Op) error {
		if n == nth {
			return err
		}
		return nil
	}
}

// Fake models the kernel's IPVS state in memory: services keyed by firewall mark or
// protocol/address/port with their family, destinations keyed by address and port within
// a service. It rejects what the kernel rejects with the same typed errors and errnos.
// It is safe for concurrent use.
//
// Not modelled: the kernel's routing checks on IPv4 destinations (it answers EINVAL for a
// destination that is not unicast in the namespace's routing, e.g. in a namespace whose
// loopback is down); only unspecified, multicast and broadcast addresses are rejected.
//
// SetFaulty (faulty.Switch) makes the fake fail requests at random as its Injector decides. Each netlink
// request is asked about: every op of Apply on its own (the kernel applies a batch op by op,
// so a failed op changes nothing and the others still apply), SetTimeouts and Flush as
// mutations, and Info, Services, GetService, Destinations, Table and Timeouts as reads; Dump
// never fails this way, so tests can always look. It composes with SetFault and SetReadFault,
// which are asked first.
//
// SetFault (faulty.Hook) installs the fault hook (nil: removes it), asked before the Injector.
type Fake struct {
	faulty.Switch
	faulty.Hook[FaultFunc]
	mu        sync.Mutex
	svcs      map[ipvs.ServiceKey]*fakeService
	info      ipvs.Info
	timeouts  ipvs.Timeouts
	readFault func() error
	mutations int
	closed    bool
}

type fakeService struct {
	svc   ipvs.Service
	dests map[netip.AddrPort]*ipvs.Destination
}

var _ ipvs.Interface = (*Fake)(nil)

// NewFake returns an empty fake with the defaults of a fresh kernel namespace: version
// 1.2.1, a 4096-entry connection table, timeouts 900/120/300 s.
func NewFake() *Fake {
	return &Fake{
		svcs:     map[ipvs.ServiceKey]*fakeService{},
		info:     ipvs.Info{Version: 0x010201, ConnTableSize: 4096},
		timeouts: ipvs.Timeouts{TCP: 900, TCPFin: 120, UDP: 300},
	}
}

// SetReadFault installs (nil: removes) a hook whose non-nil result fails every read
// (Info, Services, GetService, Destinations, Table, Timeouts, Dump).
func (f *Fake) SetReadFault(fn func() error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.readFault = fn
}

// Mutations returns how many mutations (successful or not) the fake has seen.
func (f *Fake) Mutations() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mutations
}

// SetInfo sets what Info returns.
func (f *Fake) SetInfo(i ipvs.Info) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.info = i
}

// SetServiceStats sets the counters of service k.
func (f *Fake) SetServiceStats(k ipvs.ServiceKey, st ipvs.Stats) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.lookup(k)
	if err != nil {
		return err
	}
	s.svc.Stats = &st
	return nil
}

// SetDestinationStats sets the counters of destination ap of service k.
func (f *Fake) SetDestinationStats(k ipvs.ServiceKey, ap netip.AddrPort, st ipvs.Stats) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, err := f.lookupDest(k, ap)
	if err != nil {
		return err
	}
	d.Stats = &st
	return nil
}

// SetDestinationConns sets the connection counts of destination ap of service k.
func (f *Fake) SetDestinationConns(k ipvs.ServiceKey, ap netip.AddrPort, active, inactive, persistent uint32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, err := f.lookupDest(k, ap)
	if err != nil {
		return err
	}
	d.ActiveConns, d.InactiveConns, d.PersistentConns = active, inactive, persistent
	return nil
}

func (f *Fake) lookup(k ipvs.ServiceKey) (*fakeService, error) {
	nk, err := k.Normalize()
	if err != nil {
		return nil, err
	}
	s, ok := f.svcs[nk]
	if !ok {
		return nil, kerr.Errno("ipvs fake: service "+nk.String(), syscall.ESRCH)
	}
	return s, nil
}

func (f *Fake) lookupDest(k ipvs.ServiceKey, ap netip.AddrPort) (*ipvs.Destination, error) {
	s, err := f.lookup(k)
	if err != nil {
		return nil, err
	}
	ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	d, ok := s.dests[ap]
	if !ok {
		return nil, kerr.Errno(fmt.Sprintf("ipvs fake: destination %s of %s", ap, s.svc.ServiceKey), syscall.ENOENT)
	}
	return d, nil
}

// read checks a read request: closed, the read fault hook, then (op != "", i.e. not Dump)
// the Injector.
func (f *Fake) read(op string) error {
	if f.closed {
		return ipvs.ErrClosed
	}
	if f.readFault != nil {
		if err := f.readFault(); err != nil {
			return err
		}
	}
	if op != "" {
		if err := f.Injector().Read("ipvs " + op); err != nil {
			return fmt.Errorf("ipvs: %s: %w", op, err)
		}
	}
	return nil
}

// Close implements ipvs.Interface; later calls fail.
func (f *Fake) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}

// Info implements ipvs.Interface.
func (f *Fake) Info() (ipvs.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.read("get info"); err != nil {
		return ipvs.Info{}, err
	}
	return f.info, nil
}

// Timeouts implements ipvs.Interface.
func (f *Fake) Timeouts() (ipvs.Timeouts, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.read("get timeouts"); err != nil {
		return ipvs.Timeouts{}, err
	}
	return f.timeouts, nil
}

// SetTimeouts implements ipvs.Interface.
func (f *Fake) SetTimeouts(t ipvs.Timeouts) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ipvs.ErrClosed
	}
	if err := f.Injector().Mutation("ipvs set timeouts"); err != nil {
		return fmt.Errorf("ipvs: set timeouts: %w", err)
	}
	for _, v := range []uint32{t.TCP, t.TCPFin, t.UDP} {
		if v > ipvs.MaxTimeout {
			return ipvs.Invalidf("ipvs: set timeouts: %d s is too long (max %d)", v, ipvs.MaxTimeout)
		}
	}
	if t.TCP != 0 {
		f.timeouts.TCP = t.TCP
	}
	if t.TCPFin != 0 {
		f.timeouts.TCPFin = t.TCPFin
	}
	if t.UDP != 0 {
		f.timeouts.UDP = t.UDP
	}
	return nil
}

// Flush implements ipvs.Interface.
func (f *Fake) Flush() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ipvs.ErrClosed
	}
	if err := f.Injector().Mutation("ipvs flush"); err != nil {
		return fmt.Errorf("ipvs: flush: %w", err)
	}
	clear(f.svcs)
	return nil
}

// table copies the state, sorted.
func (f *Fake) table() []ipvs.Entry {
	t := make([]ipvs.Entry, 0, len(f.svcs))
	for _, s := range f.svcs {
		e := ipvs.Entry{Service: readService(s.svc), Destinations: make([]ipvs.Destination, 0, len(s.dests))}
		for _, d := range s.dests {
			e.Destinations = append(e.Destinations, readDestination(d))
		}
		t = append(t, e)
	}
	ipvs.SortTable(t)
	return t
}

// Services implements ipvs.Interface.
func (f *Fake) Services() ([]ipvs.Service, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.read("list services"); err != nil {
		return nil, err
	}
	keys := slices.SortedFunc(maps.Keys(f.svcs), ipvs.CompareServiceKeys)
	svcs := make([]ipvs.Service, len(keys))
	for i, k := range keys {
		svcs[i] = readService(f.svcs[k].svc)
	}
	return svcs, nil
}

// GetService implements ipvs.Interface.
func (f *Fake) GetService(k ipvs.ServiceKey) (ipvs.Service, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.read("get service " + k.String()); err != nil {
		return ipvs.Service{}, err
	}
	s, err := f.lookup(k)
	if err != nil {
		return ipvs.Service{}, err
	}
	return readService(s.svc), nil
}

// Destinations implements ipvs.Interface.
func (f *Fake) Destinations(k ipvs.ServiceKey) ([]ipvs.Destination, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.read("list destinations of " + k.String()); err != nil {
		return nil, err
	}
	s, err := f.lookup(k)
	if err != nil {
		return nil, err
	}
	dests := make([]ipvs.Destination, 0, len(s.dests))
	for _, d := range s.dests {
		dests = append(dests, readDestination(d))
	}
	slices.SortFunc(dests, ipvs.CompareDestinations)
	return dests, nil
}

// Table implements ipvs.Interface.
func (f *Fake) Table() ([]ipvs.Entry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.read("list services and destinations"); err != nil {
		return nil, err
	}
	return f.table(), nil
}

// Dump implements ipvs.Interface.
func (f *Fake) Dump() (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.read(""); err != nil {
		return "", err
	}
	return ipvs.FormatDump(f.table()), nil
}

// AddService implements ipvs.Interface.
func (f *Fake) AddService(s ipvs.Service) error { return f.do(ipvs.AddServiceOp(s)) }

// UpdateService implements ipvs.Interface.
func (f *Fake) UpdateService(s ipvs.Service) error { return f.do(ipvs.UpdateServiceOp(s)) }

// DeleteService implements ipvs.Interface.
func (f *Fake) DeleteService(k ipvs.ServiceKey) error { return f.do(ipvs.DeleteServiceOp(k)) }

// AddDestination implements ipvs.Interface.
func (f *Fake) AddDestination(k ipvs.ServiceKey, d ipvs.Destination) error {
	return f.do(ipvs.AddDestinationOp(k, d))
}

// UpdateDestination implements ipvs.Interface.
func (f *Fake) UpdateDestination(k ipvs.ServiceKey, d ipvs.Destination) error {
	return f.do(ipvs.UpdateDestinationOp(k, d))
}

// DeleteDestination implements ipvs.Interface.
func (f *Fake) DeleteDestination(k ipvs.ServiceKey, ap netip.AddrPort) error {
	return f.do(ipvs.DeleteDestinationOp(k, ap))
}

func (f *Fake) do(o ipvs.Op) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ipvs.ErrClosed
	}
	return f.mutate(o)
}

// Apply implements ipvs.Interface, with the same per-op semantics as the kernel batch.
func (f *Fake) Apply(ops []ipvs.Op) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ipvs.ErrClosed
	}
	var failed []*ipvs.OpError
	for i, o := range ops {
		if err := f.mutate(o); err != nil {
			failed = append(failed, &ipvs.OpError{Index: i, Op: o, Err: err})
		}
	}
	return ipvs.NewBatchError(len(ops), failed)
}

// mutate applies one op under f.mu.
func (f *Fake) mutate(o ipvs.Op) error {
	f.mutations++
	if fault := f.Fault(); fault != nil {
		if err := fault(f.mutations, o); err != nil {
			return fmt.Errorf("ipvs: %s: %w", o, err)
		}
	}
	if err := f.Injector().Mutation("ipvs " + o.String()); err != nil {
		return fmt.Errorf("ipvs: %s: %w", o, err)
	}
	n, err := o.Normalize()
	if err != nil {
		return fmt.Errorf("ipvs: %s: %w", o, err)
	}
	if errno := f.apply(n); errno != 0 {
		return kerr.Errno("ipvs: "+n.String(), errno)
	}
	return nil
}

// apply changes the state for a normalized op, or returns the errno the kernel would.
func (f *Fake) apply(o ipvs.Op) syscall.Errno {
	k := o.Service.ServiceKey
	s, exists := f.svcs[k]
	switch o.Kind {
	case ipvs.OpAddService:
		if exists {
			return syscall.EEXIST
		}
		if errno := checkServiceSettings(o.Service); errno != 0 {
			return errno
		}
		svc := o.Service
		svc.Stats = new(ipvs.Stats) // the kernel reports counters on every service
		f.svcs[k] = &fakeService{svc: svc, dests: map[netip.AddrPort]*ipvs.Destination{}}
		return 0
	}
	if !exists {
		return syscall.ESRCH
	}
	d := o.Destination
	ap := d.AddrPort()
	cur, destExists := s.dests[ap]
	switch o.Kind {
	case ipvs.OpUpdateService:
		if errno := checkServiceSettings(o.Service); errno != 0 {
			return errno
		}
		stats := s.svc.Stats
		s.svc = o.Service
		s.svc.Stats = stats
	case ipvs.OpDeleteService:
		delete(f.svcs, k)
	case ipvs.OpAddDestination, ipvs.OpUpdateDestination:
		if inet.FamilyOf(d.Addr) != k.Family && d.Forward != ipvs.Tunnel {
			return syscall.EINVAL // mixed families only for tunnels
		}
		if d.Weight < 0 || d.LowerThreshold > d.UpperThreshold {
			return syscall.ERANGE
		}
		if d.Forward == ipvs.Tunnel && d.TunnelType == ipvs.TunnelGUE && d.TunnelPort == 0 {
			return syscall.EINVAL
		}
		if o.Kind == ipvs.OpUpdateDestination {
			if !destExists {
				return syscall.ENOENT
			}
			d.ActiveConns, d.InactiveConns, d.PersistentConns = cur.ActiveConns, cur.InactiveConns, cur.PersistentConns
			d.Stats = cur.Stats
			*cur = d
			return 0
		}
		if destExists {
			return syscall.EEXIST
		}
		if !unicastDest(d.Addr) {
			return syscall.EINVAL
		}
		d.Stats = new(ipvs.Stats)
		s.dests[ap] = &d
	case ipvs.OpDeleteDestination:
		if !destExists {
			return syscall.ENOENT
		}
		delete(s.dests, ap)
	}
	return 0
}

// readService and readDestination copy what the fake holds as a read returns it (counters
// included, which the caller may keep).
func readService(s ipvs.Service) ipvs.Service {
	if s.Stats != nil {
		st := *s.Stats
		s.Stats = &st
	}
	return s
}

func readDestination(d *ipvs.Destination) ipvs.Destination {
	c := *d
	if c.Stats != nil {
		st := *c.Stats
		c.Stats = &st
	}
	return c
}

// checkServiceSettings is the kernel's check of a new or edited service's settings.
func checkServiceSettings(s ipvs.Service) syscall.Errno {
	if !slices.Contains(fakeSchedulers, s.Scheduler) {
		return syscall.ENOENT
	}
	if s.PEName != "" && !slices.Contains(fakePEs, s.PEName) {
		return syscall.ENOENT
	}
	if s.Family == inet.IPv6 && (s.Netmask < 1 || s.Netmask > 128) {
		return syscall.EINVAL
	}
	return 0
}

// unicastDest is the part of the kernel's destination address check that needs no
// routing table.
func unicastDest(a netip.Addr) bool {
	if a.Is4() {
		b := a.As4()
		return b[0] != 0 && !a.IsMulticast() && a != netip.AddrFrom4([4]byte{255, 255, 255, 255})
	}
	return !a.IsUnspecified() && !a.IsMulticast() && !a.IsLinkLocalUnicast()
}
