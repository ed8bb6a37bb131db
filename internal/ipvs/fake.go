package ipvs

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"syscall"

	"github.com/kipvs/kipvs/internal/faulty"
	"github.com/kipvs/kipvs/internal/inet"
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
type FaultFunc func(n int, op Op) error

// FailNth returns a FaultFunc that fails the nth mutation with err.
func FailNth(nth int, err error) FaultFunc {
	return func(n int, _ Op) error {
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
	svcs      map[ServiceKey]*fakeService
	info      Info
	timeouts  Timeouts
	readFault func() error
	mutations int
	closed    bool
}

type fakeService struct {
	svc   Service
	dests map[netip.AddrPort]*Destination
}

var _ Interface = (*Fake)(nil)

// NewFake returns an empty fake with the defaults of a fresh kernel namespace: version
// 1.2.1, a 4096-entry connection table, timeouts 900/120/300 s.
func NewFake() *Fake {
	return &Fake{
		svcs:     map[ServiceKey]*fakeService{},
		info:     Info{Version: 0x010201, ConnTableSize: 4096},
		timeouts: Timeouts{TCP: 900, TCPFin: 120, UDP: 300},
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
func (f *Fake) SetInfo(i Info) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.info = i
}

// SetServiceStats sets the counters of service k.
func (f *Fake) SetServiceStats(k ServiceKey, st Stats) error {
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
func (f *Fake) SetDestinationStats(k ServiceKey, ap netip.AddrPort, st Stats) error {
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
func (f *Fake) SetDestinationConns(k ServiceKey, ap netip.AddrPort, active, inactive, persistent uint32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, err := f.lookupDest(k, ap)
	if err != nil {
		return err
	}
	d.ActiveConns, d.InactiveConns, d.PersistentConns = active, inactive, persistent
	return nil
}

func (f *Fake) lookup(k ServiceKey) (*fakeService, error) {
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

func (f *Fake) lookupDest(k ServiceKey, ap netip.AddrPort) (*Destination, error) {
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
		return errClosed
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

// Close implements Interface; later calls fail.
func (f *Fake) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}

// Info implements Interface.
func (f *Fake) Info() (Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.read("get info"); err != nil {
		return Info{}, err
	}
	return f.info, nil
}

// Timeouts implements Interface.
func (f *Fake) Timeouts() (Timeouts, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.read("get timeouts"); err != nil {
		return Timeouts{}, err
	}
	return f.timeouts, nil
}

// SetTimeouts implements Interface.
func (f *Fake) SetTimeouts(t Timeouts) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return errClosed
	}
	if err := f.Injector().Mutation("ipvs set timeouts"); err != nil {
		return fmt.Errorf("ipvs: set timeouts: %w", err)
	}
	for _, v := range []uint32{t.TCP, t.TCPFin, t.UDP} {
		if v > maxTimeout {
			return invalid("ipvs: set timeouts: %d s is too long (max %d)", v, maxTimeout)
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

// Flush implements Interface.
func (f *Fake) Flush() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return errClosed
	}
	if err := f.Injector().Mutation("ipvs flush"); err != nil {
		return fmt.Errorf("ipvs: flush: %w", err)
	}
	clear(f.svcs)
	return nil
}

// table copies the state, sorted.
func (f *Fake) table() []Entry {
	t := make([]Entry, 0, len(f.svcs))
	for _, s := range f.svcs {
		e := Entry{Service: readService(s.svc), Destinations: make([]Destination, 0, len(s.dests))}
		for _, d := range s.dests {
			e.Destinations = append(e.Destinations, readDestination(d))
		}
		t = append(t, e)
	}
	sortTable(t)
	return t
}

// Services implements Interface.
func (f *Fake) Services() ([]Service, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.read("list services"); err != nil {
		return nil, err
	}
	keys := slices.SortedFunc(maps.Keys(f.svcs), CompareServiceKeys)
	svcs := make([]Service, len(keys))
	for i, k := range keys {
		svcs[i] = readService(f.svcs[k].svc)
	}
	return svcs, nil
}

// GetService implements Interface.
func (f *Fake) GetService(k ServiceKey) (Service, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.read("get service " + k.String()); err != nil {
		return Service{}, err
	}
	s, err := f.lookup(k)
	if err != nil {
		return Service{}, err
	}
	return readService(s.svc), nil
}

// Destinations implements Interface.
func (f *Fake) Destinations(k ServiceKey) ([]Destination, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.read("list destinations of " + k.String()); err != nil {
		return nil, err
	}
	s, err := f.lookup(k)
	if err != nil {
		return nil, err
	}
	dests := make([]Destination, 0, len(s.dests))
	for _, d := range s.dests {
		dests = append(dests, readDestination(d))
	}
	slices.SortFunc(dests, CompareDestinations)
	return dests, nil
}

// Table implements Interface.
func (f *Fake) Table() ([]Entry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.read("list services and destinations"); err != nil {
		return nil, err
	}
	return f.table(), nil
}

// Dump implements Interface.
func (f *Fake) Dump() (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.read(""); err != nil {
		return "", err
	}
	return formatDump(f.table()), nil
}

// AddService implements Interface.
func (f *Fake) AddService(s Service) error { return f.do(AddServiceOp(s)) }

// UpdateService implements Interface.
func (f *Fake) UpdateService(s Service) error { return f.do(UpdateServiceOp(s)) }

// DeleteService implements Interface.
func (f *Fake) DeleteService(k ServiceKey) error { return f.do(DeleteServiceOp(k)) }

// AddDestination implements Interface.
func (f *Fake) AddDestination(k ServiceKey, d Destination) error {
	return f.do(AddDestinationOp(k, d))
}

// UpdateDestination implements Interface.
func (f *Fake) UpdateDestination(k ServiceKey, d Destination) error {
	return f.do(UpdateDestinationOp(k, d))
}

// DeleteDestination implements Interface.
func (f *Fake) DeleteDestination(k ServiceKey, ap netip.AddrPort) error {
	return f.do(DeleteDestinationOp(k, ap))
}

func (f *Fake) do(o Op) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return errClosed
	}
	return f.mutate(o)
}

// Apply implements Interface, with the same per-op semantics as the kernel batch.
func (f *Fake) Apply(ops []Op) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return errClosed
	}
	var failed []*OpError
	for i, o := range ops {
		if err := f.mutate(o); err != nil {
			failed = append(failed, &OpError{Index: i, Op: o, Err: err})
		}
	}
	return errBatch(len(ops), failed)
}

// mutate applies one op under f.mu.
func (f *Fake) mutate(o Op) error {
	f.mutations++
	if fault := f.Fault(); fault != nil {
		if err := fault(f.mutations, o); err != nil {
			return fmt.Errorf("ipvs: %s: %w", o, err)
		}
	}
	if err := f.Injector().Mutation("ipvs " + o.String()); err != nil {
		return fmt.Errorf("ipvs: %s: %w", o, err)
	}
	n, err := o.normalize()
	if err != nil {
		return fmt.Errorf("ipvs: %s: %w", o, err)
	}
	if errno := f.apply(n); errno != 0 {
		return kerr.Errno("ipvs: "+n.String(), errno)
	}
	return nil
}

// apply changes the state for a normalized op, or returns the errno the kernel would.
func (f *Fake) apply(o Op) syscall.Errno {
	k := o.Service.ServiceKey
	s, exists := f.svcs[k]
	switch o.Kind {
	case OpAddService:
		if exists {
			return syscall.EEXIST
		}
		if errno := checkServiceSettings(o.Service); errno != 0 {
			return errno
		}
		svc := o.Service
		svc.Stats = new(Stats) // the kernel reports counters on every service
		f.svcs[k] = &fakeService{svc: svc, dests: map[netip.AddrPort]*Destination{}}
		return 0
	}
	if !exists {
		return syscall.ESRCH
	}
	d := o.Destination
	ap := d.AddrPort()
	cur, destExists := s.dests[ap]
	switch o.Kind {
	case OpUpdateService:
		if errno := checkServiceSettings(o.Service); errno != 0 {
			return errno
		}
		stats := s.svc.Stats
		s.svc = o.Service
		s.svc.Stats = stats
	case OpDeleteService:
		delete(f.svcs, k)
	case OpAddDestination, OpUpdateDestination:
		if inet.FamilyOf(d.Addr) != k.Family && d.Forward != Tunnel {
			return syscall.EINVAL // mixed families only for tunnels
		}
		if d.Weight < 0 || d.LowerThreshold > d.UpperThreshold {
			return syscall.ERANGE
		}
		if d.Forward == Tunnel && d.TunnelType == TunnelGUE && d.TunnelPort == 0 {
			return syscall.EINVAL
		}
		if o.Kind == OpUpdateDestination {
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
		d.Stats = new(Stats)
		s.dests[ap] = &d
	case OpDeleteDestination:
		if !destExists {
			return syscall.ENOENT
		}
		delete(s.dests, ap)
	}
	return 0
}

// readService and readDestination copy what the fake holds as a read returns it (counters
// included, which the caller may keep).
func readService(s Service) Service {
	if s.Stats != nil {
		st := *s.Stats
		s.Stats = &st
	}
	return s
}

func readDestination(d *Destination) Destination {
	c := *d
	if c.Stats != nil {
		st := *c.Stats
		c.Stats = &st
	}
	return c
}

// checkServiceSettings is the kernel's check of a new or edited service's settings.
func checkServiceSettings(s Service) syscall.Errno {
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
