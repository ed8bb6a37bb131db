package svcstats

import (
	"sync/atomic"
	"time"

	"github.com/kipvs/kipvs/internal/ipvs"
)

// Connections holds the active and inactive connection counts of every virtual server as
// the last read of the whole IPVS table found them: the daemon's full syncs read every real
// server anyway (reconcile.ReadKernel) and hand each read to Observe. Without
// Options.Endpoints a scrape takes the kipvs_service_*_connections gauges from here, so it
// reads only the one service dump and its cost does not grow with the number of real
// servers; the gauges are then as old as the last full sync's read (at most syncPeriod).
// It is safe for concurrent use; the zero value holds nothing yet.
type Connections struct {
	last atomic.Pointer[connSnapshot]
}

type connSnapshot struct {
	at   time.Time
	byVS map[ipvs.ServiceKey]connCounts
}

type connCounts struct{ active, inactive uint64 }

// Observe replaces what c holds by the counts in tables (each the virtual servers of one
// read, together the whole table), read at.
func (c *Connections) Observe(at time.Time, tables ...[]ipvs.Entry) {
	n := 0
	for _, t := range tables {
		n += len(t)
	}
	s := &connSnapshot{at: at, byVS: make(map[ipvs.ServiceKey]connCounts, n)}
	for _, t := range tables {
		for i := range t {
			var cc connCounts
			for j := range t[i].Destinations {
				d := &t[i].Destinations[j]
				cc.active += uint64(d.ActiveConns)
				cc.inactive += uint64(d.InactiveConns)
			}
			s.byVS[t[i].Service.ServiceKey] = cc
		}
	}
	c.last.Store(s)
}

// snapshot returns the last counts Observe stored, nil before the first.
func (c *Connections) snapshot() *connSnapshot {
	if c == nil {
		return nil
	}
	return c.last.Load()
}
