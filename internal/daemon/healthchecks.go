package daemon

import (
	"context"
	"maps"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kipvs/kipvs/internal/healthcheck"
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
