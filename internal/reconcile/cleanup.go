package reconcile

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/kipvs/kipvs/internal/dataplane"
	"github.com/kipvs/kipvs/internal/dummyif"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/kerr"
	"github.com/kipvs/kipvs/internal/proxy"
)

// CleanupInput is what a cleanup looks at: the shared adapters and the dataplane's cleaner
// (every family, every backend variant that may hold kipvs's objects).
type CleanupInput struct {
	// IPVS is nil when the kernel has no IPVS (ip_vs not loaded): there are no virtual
	// servers to delete, and the rest is cleaned up all the same.
	IPVS   ipvs.Interface
	Dummy  dummyif.Interface
	Filter dataplane.Cleaner
	// NodeAddrs are the node's own addresses (NodePort virtual servers live on them).
	NodeAddrs    []netip.Addr
	ExcludeCIDRs []netip.Prefix
}

// CleanupPlan is everything kipvs (or upstream kube-proxy in IPVS mode: the names are the
// same) owns on the node, in removal order: the rules first (they reference the sets), then
// the virtual servers, the dummy link with its VIPs, and last the sets.
type CleanupPlan struct {
	Rules          []string // the dataplane's groups of rules (dataplane.Owned)
	VirtualServers []ipvs.ServiceKey
	Link           string // "" when there is no link to delete
	Sets           []string
}

// Empty reports whether there is nothing to remove.
func (p *CleanupPlan) Empty() bool {
	return len(p.Rules) == 0 && len(p.VirtualServers) == 0 && p.Link == "" && len(p.Sets) == 0
}

// String renders the plan one removal per line.
func (p *CleanupPlan) String() string {
	if p.Empty() {
		return "nothing to clean up\n"
	}
	var b strings.Builder
	for _, n := range p.Rules {
		fmt.Fprintf(&b, "remove %s rules and chains\n", n)
	}
	for _, k := range p.VirtualServers {
		fmt.Fprintf(&b, "delete virtual server %s\n", k)
	}
	if p.Link != "" {
		fmt.Fprintf(&b, "delete link %s\n", p.Link)
	}
	for _, s := range p.Sets {
		fmt.Fprintf(&b, "destroy ipset %s\n", s)
	}
	return b.String()
}

// PlanCleanup finds what there is to remove. It never includes foreign objects: virtual
// servers are kipvs's only by the ownership rule (owns: VIP bound on the dummy link, in
// a VIP set, or a node port on a node address), and never inside excludeCIDRs.
func PlanCleanup(ctx context.Context, in CleanupInput) (*CleanupPlan, error) {
	p := &CleanupPlan{}
	owned, err := in.Filter.Owned(ctx)
	if err != nil {
		return nil, err
	}
	p.Rules, p.Sets = owned.Rules, owned.Sets
	addrs, err := in.Dummy.Addresses()
	switch {
	case kerr.IsNotFound(err):
	case err != nil:
		return nil, fmt.Errorf("list addresses of %s: %w", in.Dummy.Name(), err)
	default:
		p.Link = in.Dummy.Name()
	}
	members := owned.Members
	var table []ipvs.Entry
	if in.IPVS != nil {
		if table, err = in.IPVS.Table(); err != nil {
			return nil, fmt.Errorf("read the IPVS table: %w", err)
		}
	}
	for _, f := range []inet.Family{inet.IPv4, inet.IPv6} {
		obs := &state{members: members[f], addrs: map[netip.Addr]struct{}{}}
		if obs.members == nil {
			obs.members = map[proxy.Member]struct{}{}
		}
		for _, a := range addrs {
			obs.addrs[a.Addr().Unmap()] = struct{}{}
		}
		empty := proxy.NewDesired(f)
		for _, e := range table {
			k := e.Service.ServiceKey
			if k.FWMark != 0 || !f.Matches(k.Addr) {
				continue
			}
			if owns(f, in.ExcludeCIDRs, empty, obs, fromIPVSKey(k), in.NodeAddrs, nil) {
				p.VirtualServers = append(p.VirtualServers, k)
			}
		}
	}
	slices.SortFunc(p.VirtualServers, ipvs.CompareServiceKeys)
	return p, nil
}

// ExecuteCleanup removes what p lists. Missing objects are not errors (someone else removed
// them meanwhile), so a cleanup can always be re-run.
func ExecuteCleanup(ctx context.Context, in CleanupInput, p *CleanupPlan) error {
	var errs []error
	if len(p.Rules) > 0 {
		errs = append(errs, in.Filter.RemoveRules(ctx, p.Rules))
	}
	if len(p.VirtualServers) > 0 && in.IPVS != nil {
		ops := make([]ipvs.Op, 0, len(p.VirtualServers))
		for _, k := range p.VirtualServers {
			ops = append(ops, ipvs.DeleteServiceOp(k))
		}
		if err := in.IPVS.Apply(ops); err != nil {
			var be *ipvs.BatchError
			if errors.As(err, &be) {
				for _, oe := range be.Errors {
					if !kerr.IsNotFound(oe.Err) {
						errs = append(errs, fmt.Errorf("delete virtual server %s: %w", oe.Op.Service.ServiceKey, oe.Err))
					}
				}
			} else {
				errs = append(errs, fmt.Errorf("delete virtual servers: %w", err))
			}
		}
	}
	if p.Link != "" {
		if err := in.Dummy.DeleteLink(); err != nil && !kerr.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete link %s: %w", p.Link, err))
		}
	}
	// Only after the rules are gone can the sets go (the kernel refuses a referenced set).
	if len(p.Sets) > 0 {
		errs = append(errs, in.Filter.RemoveSets(p.Sets))
	}
	return errors.Join(errs...)
}
