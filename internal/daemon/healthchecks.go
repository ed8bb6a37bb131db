package daemon

import (
	"context"
	"maps"
	"net/netip"
	"slices"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kipvs/kipvs/internal/config"
	"github.com/kipvs/kipvs/internal/healthcheck"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/watch"
)

// syncHealthChecks serves a health check for every Service with a healthCheckNodePort (the
// local endpoint count is the largest any family sees). changed nil means all Services.
func (d *Daemon) syncHealthChecks(ctx context.Context, changed map[types.NamespacedName]*watch.ServiceInfo) {
	before := maps.Clone(d.hcWant)
	consider := func(name types.NamespacedName) {
		var want healthcheck.Service
		for _, f := range d.families {
			if st := f.desired.Service(name); st != nil && st.HealthCheckNodePort != 0 {
				want.Port = st.HealthCheckNodePort
				want.LocalEndpoints = max(want.LocalEndpoints, st.LocalEndpoints)
			}
		}
		if want.Port == 0 {
			delete(d.hcWant, name)
		} else {
			d.hcWant[name] = want
		}
	}
	if changed == nil {
		clear(d.hcWant)
		for _, f := range d.families {
			for _, v := range f.desired.VirtualServers() {
				consider(v.Owner.NamespacedName)
			}
		}
	} else {
		for name := range changed {
			consider(name)
		}
	}
	if healthChecksChanged(before, d.hcWant) || changed == nil {
		d.hc.Sync(ctx, d.hcWant)
	}
}

// healthChecksChanged reports whether the health check servers wanted changed: a Service
// added or removed, or any field of one (its port, its local endpoint count).
func healthChecksChanged(a, b map[types.NamespacedName]healthcheck.Service) bool {
	return !maps.Equal(a, b)
}

// listenHealthChecks sets the addresses the health check node ports listen on from the
// node's addresses now, as kube-proxy's service health server does at start.
func (d *Daemon) listenHealthChecks() {
	host, err := d.readHost()
	if err != nil {
		d.log.Error("could not read the node's addresses; health check node ports listen on every address", zap.Error(err))
		return
	}
	fams := make([]inet.Family, 0, len(d.families))
	for _, f := range d.families {
		fams = append(fams, f.ipFamily)
	}
	addrs, all := healthCheckAddrs(&d.cfg, fams, d.nodeName, d.deps.Source.Node(), host.addrs)
	if !all && len(addrs) == 0 {
		d.log.Error("no node address matches nodePortAddresses; health check node ports listen on every address",
			zap.Stringers("nodePortAddresses", d.cfg.NodePortAddresses))
	}
	d.hc.SetAddrs(addrs)
}

// healthCheckAddrs returns the node addresses the health check node ports listen on, as
// kube-proxy: every address (all) unless nodePortAddresses limits the node ports of every
// proxied family (a CIDR of the family other than /0, or primary with a node IP of the
// family), then the node's addresses the node ports of each family listen on.
func healthCheckAddrs(cfg *config.Config, fams []inet.Family, nodeName string, node *v1.Node, host []netip.Addr) (addrs []string, all bool) {
	cidrs := nodePortCIDRs(cfg, node)
	for _, f := range fams {
		limited := slices.ContainsFunc(cidrs, func(p netip.Prefix) bool {
			return f.Matches(p.Addr()) && p.Bits() > 0
		})
		if !limited {
			return nil, true
		}
	}
	for _, f := range fams {
		for _, a := range buildOptions(cfg, f, nodeName, node, host).NodePortAddresses {
			if s := a.String(); !slices.Contains(addrs, s) {
				addrs = append(addrs, s)
			}
		}
	}
	return addrs, false
}
