package reconcile

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	"github.com/kipvs/kipvs/internal/dataplane"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/kerr"
	"github.com/kipvs/kipvs/internal/proxy"
)

// A Read is one family's copy of the kernel for a full sync, taken without holding the
// reconciler: BeginRead starts it (under the caller's lock), ReadKernel fills it (no lock:
// incremental syncs and drains may run meanwhile), FullSyncFrom finishes the sync (under the
// lock again).
//
// An object that a sync changed while the copy was being read may appear in it as before or
// as after that change: the copy of such an object is stale. The reconciler therefore
// records, from BeginRead on, every object its applies touch (the journal), and
// FullSyncFrom takes those from its model of what it applied instead of from the copy, or,
// for an object whose apply failed (the model does not know it), reads it again alone
// or re-applies it (see resolve). The
// other objects' copies are what the kernel held during the read, so drift found on them is
// real. A plan is never computed from a stale copy.
type Read struct {
	rec     *Reconciler
	journal *journal

	// Node-wide (shared by the families of one ReadKernel call).
	table    []ipvs.Entry
	addrs    []netip.Prefix
	addrsErr error // NotFound: no dummy link yet

	// This family's.
	members map[proxy.Member]struct{}
	missing []dataplane.SetSpec // the sets that do not exist
	rules   dataplane.Rules
	// err is the failure to read this family's part (the sync of this family fails, not
	// the others').
	err  error
	done bool
}

// journal holds the objects applies touched since a Read began.
type journal struct {
	vs      map[proxy.VSKey]struct{}
	members map[proxy.Member]struct{}
	addrs   map[netip.Addr]struct{}
	rules   bool
	// invalid: a set the copy found missing was created since, so the copy
	// cannot be completed from the model.
	invalid bool
}

func newJournal() *journal {
	return &journal{vs: map[proxy.VSKey]struct{}{}, members: map[proxy.Member]struct{}{}, addrs: map[netip.Addr]struct{}{}}
}

// record notes everything p may change.
func (j *journal) record(p *Plan) {
	for _, ops := range [][]ipvs.Op{p.IPVS, p.IPVSDelete} {
		for _, op := range ops {
			j.vs[fromIPVSKey(op.Service.ServiceKey)] = struct{}{}
		}
	}
	for _, ms := range [][]proxy.Member{p.AddMembers, p.DelMembers} {
		for _, m := range ms {
			j.members[m] = struct{}{}
		}
	}
	for _, as := range [][]netip.Addr{p.AddAddrs, p.DelAddrs} {
		for _, a := range as {
			j.addrs[a] = struct{}{}
		}
	}
	if p.Rules != nil || len(p.CreateSets) > 0 {
		j.rules = true
	}
	if len(p.CreateSets) > 0 {
		j.invalid = true // a set the copy found missing exists now
	}
}

// recordFailed notes the objects whose change failed (what the kernel holds of them is
// unknown).
func (j *journal) recordFailed(f failures) {
	for k := range f {
		switch k.Kind {
		case KindVirtualServer:
			j.vs[k.VS] = struct{}{}
		case KindSetMember:
			j.members[k.Member] = struct{}{}
		case KindAddress:
			j.addrs[k.Addr] = struct{}{}
		case KindSet:
			j.invalid = true
		case KindRules:
			j.rules = true
		}
	}
}

// BeginRead starts a Read of this family's kernel state. Only the latest Read of a
// reconciler can finish a sync; an older one makes FullSyncFrom read the kernel itself.
func (r *Reconciler) BeginRead() *Read {
	r.journal = newJournal()
	return &Read{rec: r, journal: r.journal}
}

// ReadKernel fills reads, one per family of the node, with what the kernel holds: the IPVS
// table and the dummy link's addresses once for all of them (both are node-wide), each
// family's sets and iptables rules. It fails when a node-wide read fails; a failure to read
// one family's part fails only that family's FullSyncFrom. It reads only through the kernel adapters, which are
// safe for concurrent use, and touches no reconciler state, so it may run while the
// reconcilers sync. The IPVS table and the sets are read over the Kernel's ReadIPVS and
// ReadFilter when set: clients of their own, so a long dump holds no socket an incremental
// sync needs.
func ReadKernel(ctx context.Context, reads ...*Read) error {
	if len(reads) == 0 {
		return nil
	}
	k := reads[0].rec.kernel
	table, err := readTable(ctx, k.ipvsReader())
	if err != nil {
		return fmt.Errorf("read the IPVS table: %w", err)
	}
	addrs, addrsErr := k.Dummy.Addresses()
	if addrsErr != nil && !kerr.IsNotFound(addrsErr) {
		return fmt.Errorf("list addresses of %s: %w", k.Dummy.Name(), addrsErr)
	}
	for _, rd := range reads {
		// Each Read keeps only its family's virtual servers, so that one family's copy is
		// garbage as soon as that family has compared it (release), not when the last
		// family has.
		rd.table = slices.DeleteFunc(slices.Clone(table), func(e ipvs.Entry) bool {
			return e.Service.FWMark != 0 || !rd.rec.opts.Family.Matches(e.Service.Addr)
		})
		rd.addrs, rd.addrsErr = addrs, addrsErr
		rd.err = rd.readFamily(ctx)
		rd.done = true
	}
	return nil
}

// readFamily reads the family's sets and rules.
func (rd *Read) readFamily(ctx context.Context) error {
	r := rd.rec
	members, missing, err := r.kernel.filterReader().Members()
	if err != nil {
		return err
	}
	rd.members, rd.missing = members, missing
	rules, err := r.kernel.Filter.ObserveRules(ctx)
	if err != nil {
		return fmt.Errorf("observe %s filter rules: %w", r.family(), err)
	}
	rd.rules = rules
	return nil
}

// Table is this family's part of the IPVS table as the read found it, each virtual server
// with its real servers (nil before the read, and once the sync that used it released it).
func (rd *Read) Table() []ipvs.Entry { return rd.table }

// release drops the copy once it has been compared (the copy of a large node is tens of
// megabytes; the plan's apply follows).
func (rd *Read) release() {
	rd.table, rd.addrs, rd.members, rd.missing, rd.rules = nil, nil, nil, nil, nil
}

// valid reports whether rd can finish a full sync of r: it is r's latest Read, it was
// filled, and nothing since made the model unable to stand in for stale copies.
func (rd *Read) valid(r *Reconciler) bool {
	return rd.rec == r && rd.done && rd.journal == r.journal && !rd.journal.invalid &&
		(r.applied != nil || rd.journal.empty())
}

func (j *journal) empty() bool {
	return len(j.vs) == 0 && len(j.members) == 0 && len(j.addrs) == 0 && !j.rules
}

// overlayVouchers replaces in obs every set member and address of j by what kipvs applied
// (its model); overlayVirtualServers does the same for virtual servers.
func (j *journal) overlayVouchers(obs, applied *state) {
	for m := range j.members {
		if _, ok := applied.members[m]; ok {
			obs.members[m] = struct{}{}
		} else {
			delete(obs.members, m)
		}
	}
	for a := range j.addrs {
		if _, ok := applied.addrs[a]; ok {
			obs.addrs[a] = struct{}{}
		} else {
			delete(obs.addrs, a)
		}
	}
}

// contextTable is an IPVS reader whose table read ctx can cut short (ipvs.Client's): the
// read of a large node takes a minute under qemu TCG, and a stopping daemon does not wait
// for it.
type contextTable interface {
	TableContext(ctx context.Context) ([]ipvs.Entry, error)
}

// readTable reads r's table, given up when ctx ends if r can be.
func readTable(ctx context.Context, r ipvs.Interface) ([]ipvs.Entry, error) {
	if ct, ok := r.(contextTable); ok {
		return ct.TableContext(ctx)
	}
	return r.Table()
}

func (k Kernel) ipvsReader() ipvs.Interface {
	if k.ReadIPVS != nil {
		return k.ReadIPVS
	}
	return k.IPVS
}

func (k Kernel) filterReader() dataplane.Filter {
	if k.ReadFilter != nil {
		return k.ReadFilter
	}
	return k.Filter
}
