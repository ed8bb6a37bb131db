package reconcile

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/kipvs/kipvs/internal/dataplane"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/kerr"
	"github.com/kipvs/kipvs/internal/proxy"
)

// Kind names a kind of kernel object the reconciler applies and tracks.
type Kind string

// The kinds of objects with a reconcile status. A real server belongs to its virtual
// server: a failed real server change leaves the virtual server failed.
const (
	KindVirtualServer Kind = "virtual_server"
	KindSetMember     Kind = "ipset_member"
	KindAddress       Kind = "address"
	KindSet           Kind = "ipset"
	KindRules         Kind = "iptables_ruleset"
)

// Kinds lists every Kind, for metrics that export a zero for each.
func Kinds() []Kind { return []Kind{KindVirtualServer, KindSetMember, KindAddress, KindSet, KindRules} }

// ObjectKey names one tracked object: Kind and the field of that kind (VS for a virtual
// server, Member, Addr, Set; none for the ruleset).
type ObjectKey struct {
	Kind   Kind
	VS     proxy.VSKey
	Member proxy.Member
	Addr   netip.Addr
	Set    proxy.Set
}

func vsObject(k proxy.VSKey) ObjectKey         { return ObjectKey{Kind: KindVirtualServer, VS: k} }
func memberObject(m proxy.Member) ObjectKey    { return ObjectKey{Kind: KindSetMember, Member: m} }
func addrObject(a netip.Addr) ObjectKey        { return ObjectKey{Kind: KindAddress, Addr: a} }
func setObject(s proxy.Set) ObjectKey          { return ObjectKey{Kind: KindSet, Set: s} }
func rulesObject() ObjectKey                   { return ObjectKey{Kind: KindRules} }
func compareObjectKey(a, b ObjectKey) int      { return strings.Compare(a.String(), b.String()) }
func (s *ObjectStatus) due(now time.Time) bool { return !now.Before(s.RetryAt) }

func (k ObjectKey) String() string {
	if n := k.Name(); n != "" {
		return string(k.Kind) + " " + n
	}
	return string(k.Kind)
}

// Name names the object within its kind ("" for the ruleset).
func (k ObjectKey) Name() string {
	switch k.Kind {
	case KindVirtualServer:
		return k.VS.String()
	case KindSetMember:
		return k.Member.Set.String() + " " + k.Member.String()
	case KindAddress:
		return k.Addr.String()
	case KindSet:
		return k.Set.String()
	}
	return ""
}

// ObjectStatus is a failed object: the kernel refused its last change, so what the kernel
// holds of it is not known (the model of what was applied does not stand in for it) until
// a retry succeeds. Objects without a status are applied as desired.
type ObjectStatus struct {
	Key ObjectKey
	// Err is the last failure; Attempts counts the failed tries in a row.
	Err      error
	Attempts int
	// RetryAt is when the next incremental sync retries it (exponential backoff); a change
	// of the object, or a full sync, retries it sooner.
	RetryAt time.Time
	// spec is the set to create again (KindSet).
	spec dataplane.SetSpec
}

// ApplyError is a sync's failure to apply some objects. The reconciler keeps every other
// object's model, retries these on their own (see Failed, NextRetry) and does not need a
// full sync for them; anything but an *ApplyError from a sync does need one (NeedsFull).
type ApplyError struct {
	Failed []ObjectKey // sorted
	Err    error       // the kernel's errors, joined
}

func (e *ApplyError) Error() string {
	names := make([]string, 0, min(len(e.Failed), 5))
	for _, k := range e.Failed[:min(len(e.Failed), 5)] {
		names = append(names, k.String())
	}
	more := ""
	if len(e.Failed) > 5 {
		more = fmt.Sprintf(" and %d more", len(e.Failed)-5)
	}
	return fmt.Sprintf("%d objects not applied (%s%s; retried on their own): %v", len(e.Failed), strings.Join(names, ", "), more, e.Err)
}

func (e *ApplyError) Unwrap() error { return e.Err }

// IsApplyError reports whether err is (or wraps) an *ApplyError: the failure of some
// objects, which their own retries take care of.
func IsApplyError(err error) bool {
	_, ok := AsApplyError(err)
	return ok
}

// AsApplyError returns the *ApplyError err is or wraps.
func AsApplyError(err error) (*ApplyError, bool) {
	var ae *ApplyError
	ok := errors.As(err, &ae)
	return ae, ok
}

// Failed returns the objects whose last change failed, sorted by key.
func (r *Reconciler) Failed() []ObjectStatus {
	out := make([]ObjectStatus, 0, len(r.failed))
	for _, s := range r.failed {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b ObjectStatus) int { return compareObjectKey(a.Key, b.Key) })
	return out
}

// NextRetry is when the earliest failed object is due for its retry; zero when none failed.
// The runner runs an incremental sync then (Sync retries what is due).
func (r *Reconciler) NextRetry() time.Time {
	var next time.Time
	for _, s := range r.failed {
		if next.IsZero() || s.RetryAt.Before(next) {
			next = s.RetryAt
		}
	}
	return next
}

// HasFailed reports whether an object of kind is failed (not applied since its failure).
func (r *Reconciler) HasFailed(kind Kind) bool {
	for k := range r.failed {
		if k.Kind == kind {
			return true
		}
	}
	return false
}

// RetryDue reports whether a failed object is due for its retry now.
func (r *Reconciler) RetryDue() bool {
	now := r.opts.Clock.Now()
	for _, s := range r.failed {
		if s.due(now) {
			return true
		}
	}
	return false
}

// backoff is the wait before retry number attempts+1 of a failed object.
func (r *Reconciler) backoff(attempts int) time.Duration {
	b := r.opts.RetryBackoff
	d := b.Initial
	for i := 1; i < attempts && d < b.Max; i++ {
		d *= 2
	}
	return min(d, b.Max)
}

// settle records the outcome of an apply: each object in scope (the objects the plan was
// computed for) that did not fail is applied, and loses its status; each that failed gets
// a status, or another attempt on it. It returns the *ApplyError for failed, nil if none.
func (r *Reconciler) settle(failed failures, inScope func(ObjectKey) bool, created []dataplane.SetSpec) error {
	for k := range r.failed {
		if _, again := failed[k]; !again && inScope(k) {
			delete(r.failed, k)
		}
	}
	now := r.opts.Clock.Now()
	for k, err := range failed {
		s := r.failed[k]
		if s == nil {
			s = &ObjectStatus{Key: k}
			r.failed[k] = s
		}
		s.Err = err
		s.Attempts++
		s.RetryAt = now.Add(r.backoff(s.Attempts))
		if k.Kind == KindSet {
			for _, spec := range created {
				if spec.Set == k.Set {
					s.spec = spec
				}
			}
		}
		if r.opts.Metrics != nil {
			r.opts.Metrics.ObjectRetries.WithLabelValues(string(k.Kind), r.family()).Inc()
		}
	}
	r.exportOutOfSync()
	if len(failed) == 0 {
		return nil
	}
	keys := sortedKeys(failed, compareObjectKey)
	errs := make([]error, 0, len(keys))
	seen := map[string]bool{}
	for _, k := range keys {
		if e := failed[k]; e != nil && !seen[e.Error()] {
			seen[e.Error()] = true
			errs = append(errs, e)
		}
	}
	return &ApplyError{Failed: keys, Err: errors.Join(errs...)}
}

// inTouched returns whether t names object k (the ruleset is always in scope: every sync
// compares it).
func inTouched(t *proxy.Touched) func(ObjectKey) bool {
	return func(k ObjectKey) bool {
		return k.Kind == KindRules || k.in(t.VirtualServers, t.Members, t.Addresses)
	}
}

// in reports whether the collection of k's kind names k (a virtual server, a member or an
// address; nothing else is in one).
func (k ObjectKey) in(vs map[proxy.VSKey]struct{}, members map[proxy.Member]struct{}, addrs map[netip.Addr]struct{}) bool {
	var ok bool
	switch k.Kind {
	case KindVirtualServer:
		_, ok = vs[k.VS]
	case KindSetMember:
		_, ok = members[k.Member]
	case KindAddress:
		_, ok = addrs[k.Addr]
	}
	return ok
}

// addTo puts a virtual server, member or address into t.
func (k ObjectKey) addTo(t *proxy.Touched) {
	switch k.Kind {
	case KindVirtualServer:
		t.VirtualServers[k.VS] = struct{}{}
	case KindSetMember:
		t.Members[k.Member] = struct{}{}
	case KindAddress:
		t.Addresses[k.Addr] = struct{}{}
	}
}

// exportOutOfSync sets the out-of-sync gauge by kind.
func (r *Reconciler) exportOutOfSync() {
	if r.opts.Metrics == nil {
		return
	}
	counts := map[Kind]int{}
	for k := range r.failed {
		counts[k.Kind]++
	}
	for _, kind := range Kinds() {
		r.opts.Metrics.ObjectsOutOfSync.WithLabelValues(string(kind), r.family()).Set(float64(counts[kind]))
	}
}

// retryScope returns t widened by every failed object that is due now, or that t names (a
// change of a failed object retries it at once); the failed objects it retries; and the
// sets to create again.
func (r *Reconciler) retryScope(t *proxy.Touched) (*proxy.Touched, []ObjectKey, []dataplane.SetSpec) {
	if len(r.failed) == 0 {
		return t, nil, nil
	}
	now := r.opts.Clock.Now()
	out := &proxy.Touched{VirtualServers: cloneSet(t.VirtualServers), Members: cloneSet(t.Members), Addresses: cloneSet(t.Addresses)}
	var retried []ObjectKey
	var sets []dataplane.SetSpec
	for k, s := range r.failed {
		due := s.due(now)
		switch k.Kind {
		case KindVirtualServer, KindSetMember, KindAddress:
			if !due && !k.in(t.VirtualServers, t.Members, t.Addresses) {
				continue
			}
			k.addTo(out)
		case KindSet:
			if !due {
				continue
			}
			sets = append(sets, s.spec)
		case KindRules:
			// The ruleset is compared on every sync (r.rules is "" after its failure).
		}
		retried = append(retried, k)
	}
	slices.SortFunc(retried, compareObjectKey)
	slices.SortFunc(sets, func(a, b dataplane.SetSpec) int { return strings.Compare(a.Name, b.Name) })
	return out, retried, sets
}

func cloneSet[K comparable](m map[K]struct{}) map[K]struct{} {
	out := make(map[K]struct{}, len(m))
	for k := range m {
		out[k] = struct{}{}
	}
	return out
}

// resolve makes model s hold, for each failed object in keys, what the kernel holds now, so
// a diff against s plans the right change for it. A virtual server is read back (one
// service and its real servers); a set member or an address cannot be read alone, so s is
// set to the opposite of what d wants, which makes the diff plan the add or delete again:
// both are idempotent in the kernel (ipset -exist; EnsureAddress, RemoveAddress). A virtual
// server that cannot be read is returned: it stays failed and out of this sync's scope.
func (r *Reconciler) resolve(s *state, keys []ObjectKey, d *proxy.Desired) (unread map[proxy.VSKey]error) {
	for _, k := range keys {
		switch k.Kind {
		case KindVirtualServer:
			if err := r.readVS(s, k.VS); err != nil {
				if unread == nil {
					unread = map[proxy.VSKey]error{}
				}
				unread[k.VS] = err
			}
		case KindSetMember:
			if d.HasMember(k.Member) {
				delete(s.members, k.Member)
			} else {
				s.members[k.Member] = struct{}{}
			}
		case KindAddress:
			if d.HasAddress(k.Addr) {
				delete(s.addrs, k.Addr)
			} else {
				s.addrs[k.Addr] = struct{}{}
			}
		}
	}
	return unread
}

// readVS reads virtual server k and its real servers into s (removes it when the kernel
// has none).
func (r *Reconciler) readVS(s *state, k proxy.VSKey) error {
	key := toIPVSKey(k)
	svc, err := r.kernel.IPVS.GetService(key)
	if kerr.IsNotFound(err) {
		delete(s.vs, k)
		return nil
	}
	if err != nil {
		return fmt.Errorf("read back virtual server %s: %w", k, err)
	}
	dests, err := r.kernel.IPVS.Destinations(key)
	if kerr.IsNotFound(err) {
		delete(s.vs, k)
		return nil
	}
	if err != nil {
		return fmt.Errorf("read back real servers of %s: %w", k, err)
	}
	svc.Stats = nil
	vs := &vsState{svc: svc, dests: make(map[netip.AddrPort]destState, len(dests))}
	for _, dst := range dests {
		vs.dests[dst.AddrPort()] = destState{weight: dst.Weight, active: dst.ActiveConns, inactive: dst.InactiveConns}
	}
	s.vs[k] = vs
	return nil
}

// failures collects, while a plan is applied, the objects that failed and why.
type failures map[ObjectKey]error

func (f failures) add(k ObjectKey, err error) {
	if _, ok := f[k]; !ok {
		f[k] = err
	}
}

// vsOf is the virtual server of an IPVS op.
func vsOf(op *ipvs.Op) proxy.VSKey { return fromIPVSKey(op.Service.ServiceKey) }
