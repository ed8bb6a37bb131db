package daemon

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kipvs/kipvs/internal/config"
	"github.com/kipvs/kipvs/internal/proxy"
	"github.com/kipvs/kipvs/internal/watch"
)

// reportService reports the problems a Service has in the family now: its own, and the
// virtual servers it claims but another Service wins (never on the winner).
func (d *Daemon) reportService(f *family, name types.NamespacedName) {
	var problems []proxy.Problem
	if st := f.desired.Service(name); st != nil {
		problems = append(slices.Clone(st.Problems), f.desired.ConflictsOf(name)...)
	}
	d.report(f, name, problems)
}

// track updates the per-Service bookkeeping of one family after a Service was rebuilt: its
// no-local-endpoints state. (Its problems are reported once every change is in, with the
// conflicts the change made: reportService.)
func (d *Daemon) track(f *family, name types.NamespacedName, st *proxy.ServiceState) {
	setFlag(f.noLocalInternal, name, st != nil && st.NoLocalInternal)
	setFlag(f.noLocalExternal, name, st != nil && st.NoLocalExternal)
}

// trackReadmitted updates the bookkeeping of the Services that other Services' changes let
// into a set they had been held back from, and returns them: their problems changed, and the
// caller reports them (reportService).
func (d *Daemon) trackReadmitted(f *family) []types.NamespacedName {
	names := f.desired.TakeReadmitted()
	for _, name := range names {
		d.track(f, name, f.desired.Service(name))
	}
	return names
}

// countNotProgrammed sets the gauge of Services not programmed for a capacity limit from the
// problems reported, and the gauge of the namespace holding the most of each budget.
func (d *Daemon) countNotProgrammed(f *family) {
	for reason, n := range d.notProgrammed(f) {
		d.metrics.ServicesNotProgrammed.WithLabelValues(reason, f.ipFamily.String()).Set(float64(n))
	}
	d.metrics.CapacityTopNamespace.DeletePartialMatch(map[string]string{"ip_family": f.ipFamily.String()})
	for _, b := range f.desired.Budgets() {
		d.metrics.CapacityTopNamespace.WithLabelValues(b.Name, b.TopNamespace, f.ipFamily.String()).Set(float64(b.TopUsed))
	}
}

// notProgrammed counts the Services of family f the problems reported say a capacity limit
// keeps out, by reason (every reason, 0 included).
func (d *Daemon) notProgrammed(f *family) map[string]int {
	counts := map[string]int{}
	for _, r := range proxy.CapacityReasons() {
		counts[r] = 0
	}
	for k, ps := range d.problems {
		if k.family != f.ipFamily {
			continue
		}
		for _, p := range ps {
			if _, ok := counts[p.Reason]; ok {
				counts[p.Reason]++
			}
		}
	}
	return counts
}

func setFlag(m map[types.NamespacedName]bool, k types.NamespacedName, on bool) {
	if on {
		m[k] = true
	} else {
		delete(m, k)
	}
}

// maxReportedProblems is how many new problems of one Service one report logs and passes
// to the Events one by one; the rest are logged as one line with their count, and counted
// in the Events (a Service may hold tens of thousands of bad externalIPs).
const maxReportedProblems = 10

// report logs, and sends as Warning Events, the problems of a Service that were not
// already reported (a Service-wide problem's Event only from the Service's elected node:
// sendsEvent); it forgets problems that went away so they are reported again if they
// come back. It runs under the sync lock: its cost is linear in the problems (the old ones
// are indexed), and it logs at most maxReportedProblems of them one by one.
func (d *Daemon) report(f *family, svc types.NamespacedName, problems []proxy.Problem) {
	key := problemKey{family: f.ipFamily, svc: svc}
	old := d.problems[key]
	if len(problems) == 0 {
		delete(d.problems, key)
		return
	}
	d.problems[key] = problems
	var known map[proxy.Problem]struct{}
	if len(old) > 0 {
		known = make(map[proxy.Problem]struct{}, len(old))
		for _, p := range old {
			known[p] = struct{}{}
		}
	}
	reported := 0
	var more, moreEvents map[string]int // reason -> new problems not reported one by one (logged; sent as Events)
	for _, p := range problems {
		if _, ok := known[p]; ok {
			continue
		}
		if reported == maxReportedProblems {
			if more == nil {
				more, moreEvents = map[string]int{}, map[string]int{}
			}
			more[p.Reason]++
			if d.sendsEvent(p) {
				moreEvents[p.Reason]++
			}
			continue
		}
		reported++
		d.log.Warn("service cannot be programmed as written", zap.String("family", f.ipFamily.String()),
			zap.String("service", p.Service.String()), zap.String("field", p.Field), zap.String("reason", p.Reason), zap.String("message", p.Message))
		if d.deps.Events != nil && d.sendsEvent(p) {
			d.deps.Events.Warn(p.Service, p.Reason, fmt.Sprintf("%s: %s", p.Field, p.Message))
		}
	}
	if more != nil {
		d.reportMore(f, svc, more, moreEvents)
	}
}

// moreProblemsMessage is the log message of the count of a Service's new problems of one
// reason that report did not log one by one.
const moreProblemsMessage = "service cannot be programmed as written: more problems not logged one by one"

// reportMore logs the count of the new problems of a Service that report left out, one
// line per reason, and adds those this node sends Events for (events) to the Events' counts.
func (d *Daemon) reportMore(f *family, svc types.NamespacedName, more, events map[string]int) {
	reasons := make([]string, 0, len(more))
	for r := range more {
		reasons = append(reasons, r)
	}
	slices.Sort(reasons)
	for _, r := range reasons {
		d.log.Warn(moreProblemsMessage, zap.String("family", f.ipFamily.String()), zap.String("service", svc.String()),
			zap.String("reason", r), zap.Int("more", more[r]))
		if d.events != nil && events[r] > 0 {
			d.events.count(svc, r, events[r])
		}
	}
}

// clusterCIDROverlaps finds the seed-001 mistake: clusterCIDRs that are, contain or lie
// inside a Service CIDR. It returns them and an error explaining each (nil: none). The
// Service CIDRs come from the cluster's ServiceCIDR objects, else --kipvs-service-cidr;
// with neither, a clusterCIDR holding default/kubernetes's cluster IP is the evidence.
func (d *Daemon) clusterCIDROverlaps(sc watch.ServiceCIDRs) ([]netip.Prefix, error) {
	cidrs := sc.CIDRs
	source := "the cluster's ServiceCIDR objects"
	if len(cidrs) == 0 {
		cidrs = d.cfg.Kipvs.ServiceCIDRs
		source = "--kipvs-service-cidr"
	}
	var bad []netip.Prefix
	var errs []error
	for _, p := range d.cfg.ClusterCIDRs {
		if len(cidrs) > 0 {
			if err := config.CheckClusterCIDR([]netip.Prefix{p}, cidrs); err != nil {
				bad = append(bad, p)
				errs = append(errs, fmt.Errorf("service CIDR from %s: %w", source, err))
			}
			continue
		}
		for _, ip := range sc.KubernetesServiceIPs {
			if p.Contains(ip) {
				bad = append(bad, p)
				errs = append(errs, fmt.Errorf("clusterCIDR %s contains %s, the cluster IP of default/kubernetes: %w", p, ip,
					config.CheckClusterCIDR([]netip.Prefix{p}, []netip.Prefix{netip.PrefixFrom(ip, ip.BitLen())})))
				break
			}
		}
	}
	return bad, errors.Join(errs...)
}

// checkClusterCIDR runs at every sync (the Service CIDRs can change), before the options
// are built. A clusterCIDR that overlaps the Service CIDR is not used to detect local
// traffic: kube-proxy would use it, so the node's own connections to cluster IPs (whose
// source is the cluster IP itself) would look like pod traffic and not be masqueraded,
// and the node could not reach Services. kipvs keeps running instead of crash-looping,
// masquerades as it does with no detector (the node's own connections to cluster IPs), and
// reports the mistake loudly: an ERROR log, a Warning Event on the Node and
// kipvs_cluster_cidr_overlaps_service_cidr 1, each time the finding changes.
func (d *Daemon) checkClusterCIDR() {
	var sc watch.ServiceCIDRs
	if d.deps.Source != nil {
		sc = d.deps.Source.ServiceCIDRs()
	}
	bad, err := d.clusterCIDROverlaps(sc)
	if slices.Equal(bad, d.badClusterCIDRs) && d.clusterCIDRChecked {
		return
	}
	prev := d.badClusterCIDRs
	d.clusterCIDRChecked = true
	d.badClusterCIDRs = bad
	if len(bad) == 0 {
		d.metrics.ClusterCIDROverlapsServiceCIDR.Set(0)
		if len(prev) > 0 {
			d.log.Info("clusterCIDR no longer overlaps the Service CIDR; it detects local traffic again", zap.Stringers("clusterCIDRs", d.cfg.ClusterCIDRs))
		}
		return
	}
	d.metrics.ClusterCIDROverlapsServiceCIDR.Set(1)
	msg := fmt.Sprintf("clusterCIDR %s is not used to detect local traffic: %v. kipvs keeps running and masquerades "+
		"traffic to cluster IPs as it does with no local-traffic detector (the node's own connections, whose source is "+
		"the cluster IP itself); fix clusterCIDR", prefixList(bad), err)
	d.log.Error("clusterCIDR overlaps the Service CIDR", zap.Stringers("clusterCIDRs", bad), zap.Error(err))
	if d.deps.Events != nil {
		d.deps.Events.WarnNode(d.nodeName, "ClusterCIDROverlapsServiceCIDR", msg)
	}
}

func prefixList(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}
