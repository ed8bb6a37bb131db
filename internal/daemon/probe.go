package daemon

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/ipvsmode"
	"github.com/kipvs/kipvs/internal/kerr"
	"github.com/kipvs/kipvs/internal/proxy"
	"github.com/kipvs/kipvs/internal/watch"
)

// probeVIP is a documentation address (TEST-NET-2) used for the throwaway virtual server.
var probeVIP = netip.MustParseAddr("198.51.100.200")

// probeKey is the throwaway virtual server of probeScheduler.
var probeKey = ipvs.ServiceKey{Family: inet.IPv4, Protocol: inet.TCP, Addr: probeVIP, Port: 9}

// probeSchedulers checks that every scheduler a Service asks for by annotation can be
// loaded, so a missing module degrades that Service to the global scheduler (with a Warning
// Event) instead of failing its virtual servers. A scheduler is probed when first asked
// for; one found unavailable is probed again on every full sync (retry), so a module that
// becomes loadable later is used: the options then change and the full sync rebuilds the
// Services that asked for it.
func (d *Daemon) probeSchedulers(services map[types.NamespacedName]*watch.ServiceInfo, retry bool) {
	probed := map[string]bool{}
	for _, info := range services {
		if info == nil {
			continue
		}
		s, ok := proxy.RequestedScheduler(info.Service)
		if !ok || probed[s] {
			continue
		}
		avail, known := d.schedulers[s]
		if known && (avail || !retry) {
			continue
		}
		probed[s] = true
		d.probeScheduler(s, known)
	}
}

// reprobeSchedulers probes again every scheduler found unavailable (the periodic full
// sync's retry, see probeSchedulers).
func (d *Daemon) reprobeSchedulers() {
	for _, s := range slices.Sorted(maps.Keys(d.schedulers)) {
		if !d.schedulers[s] {
			d.probeScheduler(s, true)
		}
	}
}

// probeScheduler probes s and records the result; known: s was probed before.
func (d *Daemon) probeScheduler(s string, known bool) {
	err := probeScheduler(d.deps.IPVS, s)
	if errors.Is(err, errProbeLeftover) {
		d.probeLeftover = true
		err = nil
	}
	if err != nil && !kerr.IsNotFound(err) {
		// A transient failure tells nothing about the scheduler: ask again next sync.
		d.log.Debug("scheduler probe failed; probing again at the next sync", zap.String("scheduler", s), zap.Error(err))
		return
	}
	d.schedulers[s] = err == nil
	switch {
	case err == nil && known:
		d.log.Info("scheduler requested by a Service is available now", zap.String("scheduler", s))
	case err != nil && !known:
		d.log.Warn("scheduler requested by a Service is unavailable", zap.String("scheduler", s), zap.Error(err))
	case err != nil:
		d.log.Debug("scheduler requested by a Service is still unavailable", zap.String("scheduler", s), zap.Error(err))
	}
}

// errProbeLeftover is returned (wrapped) by probeScheduler when the scheduler loaded but the
// throwaway virtual server could not be deleted: the scheduler is available, and the
// leftover is removed by a later full sync (removeProbeLeftover).
var errProbeLeftover = errors.New("the probe virtual server could not be removed")

// probeScheduler creates and deletes a throwaway virtual server, so a scheduler whose
// kernel module is missing fails at start with the module's name. An error matching
// kerr.ErrNotFound means the scheduler is unavailable; one matching errProbeLeftover means
// it is available; any other error says nothing about it (a transient kernel failure).
func probeScheduler(v ipvs.Interface, sched string) error {
	if sched == "" {
		sched = ipvsmode.DefaultScheduler
	}
	_ = v.DeleteService(probeKey) // a leftover of a crashed or failed probe
	if err := v.AddService(ipvs.Service{ServiceKey: probeKey, Scheduler: sched}); err != nil {
		if kerr.IsNotFound(err) {
			return fmt.Errorf("IPVS scheduler %q is not available: load the kernel module ip_vs_%s (modprobe ip_vs_%s): %w", sched, sched, sched, err)
		}
		return fmt.Errorf("probe IPVS scheduler %q with a virtual server on %s: %w", sched, probeVIP, err)
	}
	if err := v.DeleteService(probeKey); err != nil {
		return fmt.Errorf("remove the probe virtual server %s: %w: %w", probeVIP, errProbeLeftover, err)
	}
	return nil
}

// removeProbeLeftover deletes the throwaway virtual server a failed probe left behind.
func (d *Daemon) removeProbeLeftover() {
	if !d.probeLeftover {
		return
	}
	if err := d.deps.IPVS.DeleteService(probeKey); err != nil && !kerr.IsNotFound(err) {
		d.log.Warn("cannot remove the scheduler probe's virtual server; retrying at the next full sync", zap.Error(err))
		return
	}
	d.probeLeftover = false
}
