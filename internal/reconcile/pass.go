package reconcile

import (
	"context"
	"errors"
	"iter"
	"maps"
	"math"
	"net/netip"
	"slices"

	"github.com/kipvs/kipvs/internal/dummyif"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/proxy"
)

// A Pass is a full sync over a Read, done in steps: each step compares a chunk of objects
// with the Read, counts their drift and repairs them, and applies what it planned before
// the next step plans anything, so that neither a step's lock nor its plan grows with the
// node. It is the one full-sync algorithm: FullSync and FullSyncFrom run a Pass to its end
// under one hold of the lock (Run), the periodic full sync runs passes with the lock
// released between steps (RunPasses).
//
// The periodic full sync releases its lock between steps and runs incremental syncs and
// drains there. Those keep recording what they touch in the Read's journal until the pass
// ends, so an object a sync touched before its chunk is compared is taken from the model
// of what was applied, never from the (then stale) copy: a step never applies a plan
// computed from a stale copy. Objects a chunk has repaired are current in the model,
// which the syncs in between diff against as usual. A first full sync (adoption: no model
// yet) runs every step under one hold of the lock: nothing may sync against a model that
// is not complete.
//
// Steps go in this order: the dummy link and the sets the Read found missing; addresses
// and set members, compared, with the adds applied; virtual servers; the member and
// address deletes found; the rules. So, as in one plan (see Plan), what makes a virtual
// server kipvs's is there before it is created and goes only after it is deleted. A pass that a full sync overtakes (it begins
// a Read of its own, or a read fails) stops: that sync compares everything.
//
// Use: RunPasses, or BeginPass and every Step under the lock that serializes the
// reconciler's methods, Prepare without it, Result once Step reported the end. A pass under
// one hold of the lock runs with Run, which binds the VIPs beside the later steps.
type Pass struct {
	r  *Reconciler
	rd *Read
	j  *journal
	d  *proxy.Desired
	po *proxy.Options
	// whole: the pass cannot be done over rd (see BeginPass); its first step reads again.
	whole bool
	// adopting: the first full sync of this reconciler (no model before it): no drift is
	// counted, and the model is complete only once the pass is over.
	adopting bool
	started  bool

	// The objects to compare: every key the Read, the desired state, the model and the owned
	// list named when the pass began (sorted and made unique by Prepare).
	vs      []proxy.VSKey
	members []proxy.Member
	addrs   []netip.Addr
	next    int // index into the concatenation members, addrs, vs
	// pulls copy the keys of the desired state and the model (Collect).
	// The keys go into blocks of keyBlock (no copy of all the keys so far under the lock
	// when a slice grows); Prepare joins them, without the lock.
	pulls        []keyPull
	prepared     bool
	vsBlocks     [][]proxy.VSKey
	memberBlocks [][]proxy.Member
	addrBlocks   [][]netip.Addr
	// delMembers and delAddrs are the deletes the member and address steps found (applied
	// after the virtual servers: a virtual server is never without what makes it kipvs's);
	// nextDel indexes their concatenation.
	delMembers []proxy.Member
	delAddrs   []netip.Addr
	nextDel    int
	// table indexes the Read's virtual servers; vouch holds its members and addresses,
	// those the journal names taken from the model (the ownership rule).
	table     map[proxy.VSKey]*ipvs.Entry
	vouch     *state
	nodeAddrs []netip.Addr

	res Result
	// keepPlan keeps the steps' plans in plan (tests); otherwise only their count is kept.
	keepPlan bool
	plan     Plan
	failed   map[ObjectKey]struct{}
	errs     []error
	err      error // a failure that is not an *ApplyError (the whole pass's)
	over     bool
	aborted  bool
	// binds, while Run runs the pass: the address steps' binds, in a goroutine.
	binds *binder
	times RunTimes
}

// StepSize is how many objects one step of a pass compares and repairs under the lock (and
// how many keys one Collect copies): about 30 ms of the lock under qemu TCG, whatever the
// number of Services.
const StepSize = 256

// BeginPass starts a full sync over rd (filled by ReadKernel) for desired state d, in steps.
// A Read that cannot be completed from the model (it is not the latest, or an apply failed
// since) or that failed makes the pass read the kernel again in its first step (reread).
func (r *Reconciler) BeginPass(d *proxy.Desired, po *proxy.Options, rd *Read) *Pass {
	p := &Pass{r: r, rd: rd, j: rd.journal, d: d, po: po, res: Result{Full: true, Drift: map[string]int{}},
		failed: map[ObjectKey]struct{}{}}
	if rd.err != nil || !rd.valid(r) {
		p.whole = true
		return p
	}
	if r.applied == nil {
		p.adopting = true
		r.applied = newState()
	}
	// No key is copied here: Collect pulls them a chunk at a time (at 50,000 Services the
	// copy in one piece was the longest hold of the lock in a pass).
	p.pulls = []keyPull{
		pullKeys(d.VSKeys(), &p.vsBlocks), pullKeys(maps.Keys(r.applied.vs), &p.vsBlocks), pullKeys(maps.Keys(r.owned), &p.vsBlocks),
		pullKeys(d.MemberKeys(), &p.memberBlocks), pullKeys(maps.Keys(r.applied.members), &p.memberBlocks),
		pullKeys(d.AddressKeys(), &p.addrBlocks), pullKeys(maps.Keys(r.applied.addrs), &p.addrBlocks),
	}
	if po != nil {
		p.nodeAddrs = slices.Clone(po.NodePortAddresses)
	}
	return p
}

// Collect copies up to n more keys (n <= 0: all that are left) of the objects the pass
// compares from the desired state and the model of what was applied, and reports whether
// they are all in. Call it under the lock that serializes the reconciler's methods, as
// often as it takes, then Prepare: the lock is held for n keys at a time, whatever the
// number of Services. Syncs between two calls journal what they touch, and a step takes
// those objects from the model; a key they add or remove may or may not be copied, which
// changes nothing (TestPassEndsTheSameWhateverItsSteps runs syncs between the calls). A full sync
// since BeginPass, or a failed read, ends the pass as Step does.
func (p *Pass) Collect(n int) bool {
	if len(p.pulls) == 0 {
		return true
	}
	if p.r.journal != p.j || p.r.applied == nil {
		p.stopPulls()
		p.aborted, p.over = true, true
		p.rd.release()
		return true
	}
	if n <= 0 {
		n = math.MaxInt
	}
	for n > 0 && len(p.pulls) > 0 {
		got, done := p.pulls[0].pull(n)
		n -= got
		if done {
			p.pulls[0].stop()
			p.pulls = p.pulls[1:]
		}
	}
	return len(p.pulls) == 0
}

// Collected is how many keys the pass holds before Prepare (with repeats: an object both
// desired and applied is copied twice; Prepare makes them unique).
func (p *Pass) Collected() int {
	n := 0
	for _, b := range p.vsBlocks {
		n += len(b)
	}
	for _, b := range p.memberBlocks {
		n += len(b)
	}
	for _, b := range p.addrBlocks {
		n += len(b)
	}
	return n
}

// Prepared reports whether Prepare has run.
func (p *Pass) Prepared() bool { return p.prepared }

// Close releases what a pass that is given up before Collect reported the end holds.
// Closing a pass twice, or one that was collected, is fine.
func (p *Pass) Close() { p.stopPulls() }

func (p *Pass) stopPulls() {
	for _, k := range p.pulls {
		k.stop()
	}
	p.pulls = nil
}

// A keyPull copies the keys of one map into a slice, a chunk at a time.
type keyPull struct {
	// pull appends up to n keys and reports how many, and whether the map has no more.
	pull func(n int) (int, bool)
	stop func()
}

// keyBlock is how many keys one block of a pass's copy holds.
const keyBlock = 4096

func pullKeys[K any](seq iter.Seq[K], into *[][]K) keyPull {
	next, stop := iter.Pull(seq)
	return keyPull{stop: stop, pull: func(n int) (int, bool) {
		for i := range n {
			k, ok := next()
			if !ok {
				return i, true
			}
			if b := *into; len(b) == 0 || len(b[len(b)-1]) == keyBlock {
				*into = append(b, make([]K, 0, keyBlock))
			}
			last := &(*into)[len(*into)-1]
			*last = append(*last, k)
		}
		return n, false
	}}
}

// joinBlocks is the keys of blocks in one slice, with room for extra more.
func joinBlocks[K any](blocks [][]K, extra int) []K {
	n := extra
	for _, b := range blocks {
		n += len(b)
	}
	out := make([]K, 0, n)
	for _, b := range blocks {
		out = append(out, b...)
	}
	return out
}

// Prepare adds the Read's objects to the pass's, sorts them and indexes the Read. Once
// Collect has reported the end, it touches only the pass and the Read (no reconciler
// state), so it runs without the caller's lock; before, it collects the rest first, which
// needs the lock.
func (p *Pass) Prepare() {
	if p.prepared {
		return
	}
	p.prepared = true
	if len(p.pulls) > 0 {
		p.Collect(0)
	}
	if p.whole || p.over {
		return
	}
	rd := p.rd
	p.vs = joinBlocks(p.vsBlocks, len(rd.table))
	p.members = joinBlocks(p.memberBlocks, len(rd.members))
	p.addrs = joinBlocks(p.addrBlocks, len(rd.addrs))
	p.vsBlocks, p.memberBlocks, p.addrBlocks = nil, nil, nil
	for i := range rd.table {
		p.vs = append(p.vs, fromIPVSKey(rd.table[i].Service.ServiceKey))
	}
	for m := range rd.members {
		p.members = append(p.members, m)
	}
	p.vouch = &state{members: rd.members, addrs: map[netip.Addr]struct{}{}}
	if p.vouch.members == nil {
		p.vouch.members = map[proxy.Member]struct{}{}
	}
	for _, pfx := range rd.addrs {
		if a := pfx.Addr().Unmap(); p.r.opts.Family.Matches(a) && !dummyif.KernelLinkLocal(pfx) {
			p.vouch.addrs[a] = struct{}{}
		}
	}
	for a := range p.vouch.addrs {
		p.addrs = append(p.addrs, a)
	}
	slices.SortFunc(p.vs, proxy.VSKey.Compare)
	p.vs = slices.Compact(p.vs)
	slices.SortFunc(p.members, proxy.Member.Compare)
	p.members = slices.Compact(p.members)
	slices.SortFunc(p.addrs, netip.Addr.Compare)
	p.addrs = slices.Compact(p.addrs)
	p.table = make(map[proxy.VSKey]*ipvs.Entry, len(p.rd.table))
	for i := range p.rd.table {
		p.table[fromIPVSKey(p.rd.table[i].Service.ServiceKey)] = &p.rd.table[i]
	}
}

// Step compares and repairs up to n more objects of one kind (after the last of them: the
// rules) and reports whether the pass is over.
func (p *Pass) Step(ctx context.Context, n int) bool {
	if !p.prepared {
		p.Prepare() // under the lock: collects what is left
	}
	if p.over {
		return true
	}
	r := p.r
	if p.whole {
		// The Read failed or cannot be completed from the model: read the kernel again.
		return p.reread(ctx)
	}
	if r.journal != p.j || r.applied == nil {
		// A full sync began since, or a read failed: that sync compares everything.
		p.aborted, p.over = true, true
		p.rd.release()
		return true
	}
	if err := ctx.Err(); err != nil {
		p.fail(err)
		return true
	}
	if p.j.invalid {
		// A sync created a set the copy found missing: the copy of its members cannot be
		// completed from the model. Read the kernel again, all of it.
		r.opts.Logger.Debug("kernel read outdated by a set created during the pass; reading again")
		return p.reread(ctx)
	}
	n = max(n, 1)
	// Addresses first: under Run their binds, the longest part of a first sync, start at
	// once, beside the member steps.
	na, nm := len(p.addrs), len(p.addrs)+len(p.members)
	nd := len(p.delMembers) + len(p.delAddrs)
	switch i := p.next; {
	case !p.started:
		p.setup(ctx)
	case i < na:
		end := min(i+n, na)
		p.stepAddrs(ctx, p.addrs[i:end])
		p.next = end
	case i < nm:
		end := min(i+n, nm)
		p.stepMembers(ctx, p.members[i-na:end-na])
		p.next = end
	case i < nm+len(p.vs):
		end := min(i+n, nm+len(p.vs))
		keys := p.vs[i-nm : end-nm]
		p.awaitBinds(ctx, keys[len(keys)-1].Address, false)
		p.stepVS(ctx, keys)
		p.next = end
	case p.binds != nil && len(p.binds.pending) > 0:
		p.awaitBinds(ctx, netip.Addr{}, true) // those no virtual server waited for
	case p.nextDel < nd:
		if p.nextDel == 0 {
			slices.SortFunc(p.delMembers, proxy.Member.Compare)
			p.delMembers = slices.Compact(p.delMembers)
			slices.SortFunc(p.delAddrs, netip.Addr.Compare)
			p.delAddrs = slices.Compact(p.delAddrs)
			nd = len(p.delMembers) + len(p.delAddrs)
		}
		end := min(p.nextDel+n, nd)
		nm := len(p.delMembers)
		ms := p.delMembers[min(p.nextDel, nm):min(end, nm)]
		as := p.delAddrs[max(p.nextDel-nm, 0):max(end-nm, 0)]
		p.stepDeletes(ctx, ms, as)
		p.nextDel = end
	default:
		p.finish(ctx)
	}
	return p.over
}

// reread starts the pass again over a new Read of the kernel, taken in this step (under
// the caller's lock), when the one it began with cannot finish it: that Read failed (the
// pass fails with its error when it is the latest), a full sync or a failed apply since
// outdated it (BeginPass), or a sync created a set its copy found missing. What the steps
// so far applied, failed and counted stays in the pass. It reports whether the pass is
// over (it is unless the new Read was taken).
func (p *Pass) reread(ctx context.Context) bool {
	r := p.r
	if p.rd.err != nil && p.rd.journal == r.journal {
		r.journal, r.applied = nil, nil
		p.err, p.over = p.rd.err, true
		return true
	}
	if p.whole {
		r.opts.Logger.Debug("kernel read outdated by a failed or full sync; reading again")
	}
	p.awaitBinds(ctx, netip.Addr{}, true)
	p.rd.release()
	rd := r.BeginRead()
	if err := ReadKernel(ctx, rd); err != nil {
		r.journal, r.applied = nil, nil
		p.err, p.over = err, true
		return true
	}
	q := r.BeginPass(p.d, p.po, rd)
	if q.whole {
		// Nothing ran since the Read was taken: only a failed read is left, and a read
		// that failed returned its error above.
		r.journal, r.applied = nil, nil
		p.err, p.over = errors.New("kernel read not usable right after it was taken"), true
		return true
	}
	q.adopting = q.adopting || p.adopting
	q.res.Changes, q.keepPlan, q.plan = p.res.Changes, p.keepPlan, p.plan
	q.failed, q.errs = p.failed, p.errs
	q.binds, q.times = p.binds, p.times
	*p = *q
	p.Prepare()
	return false
}

// Progress is how many objects the steps so far compared, of how many (the rules aside).
func (p *Pass) Progress() (done, total int) {
	return p.next + p.nextDel, len(p.vs) + len(p.members) + len(p.addrs) + len(p.delMembers) + len(p.delAddrs)
}

// Over reports whether the pass is over (Step reported it).
func (p *Pass) Over() bool { return p.over }

// Aborted reports that a full sync overtook the pass (it did not finish; that sync did).
func (p *Pass) Aborted() bool { return p.aborted }

// Result is the pass's outcome once Step reported the end: as FullSyncFrom's, with the
// changes of every step counted (Plan: nil, or every step's plan when kept) and the objects
// that failed in any of them.
func (p *Pass) Result() (Result, error) {
	if p.err != nil {
		return p.res, p.err
	}
	if p.keepPlan {
		p.res.Plan = &p.plan
	}
	if len(p.failed) == 0 {
		return p.res, nil
	}
	keys := make([]ObjectKey, 0, len(p.failed))
	for k := range p.failed {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareObjectKey)
	return p.res, &ApplyError{Failed: keys, Err: errors.Join(p.errs...)}
}

// fail ends the pass with err: the model is not known to be complete (a full sync follows).
func (p *Pass) fail(err error) {
	p.r.journal, p.r.applied = nil, nil
	p.err, p.over = err, true
	p.rd.release()
}
