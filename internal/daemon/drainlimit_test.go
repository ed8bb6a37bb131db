package daemon

import (
	"testing"
	"time"

	"github.com/kipvs/kipvs/internal/reconcile"
)

// --kipvs-graceful-period=0 gives the reconciler no time limit (kube-proxy's drain: until the
// connections end); a period is passed on as it is.
func TestDrainLimit(t *testing.T) {
	for _, tc := range []struct {
		flag   time.Duration
		atOnce bool
		want   time.Duration
	}{
		{0, false, reconcile.NoDrainLimit},
		{30 * time.Second, false, 30 * time.Second},
		{time.Hour, false, time.Hour},
		{30 * time.Second, true, 0},
		{0, true, 0},
	} {
		if got := drainLimit(tc.flag, tc.atOnce); got != tc.want {
			t.Errorf("drainLimit(%s, atOnce %v) = %s, want %s", tc.flag, tc.atOnce, got, tc.want)
		}
	}
}
