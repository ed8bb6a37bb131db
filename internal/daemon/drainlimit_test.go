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
		flag time.Duration
		want time.Duration
	}{
		{0, reconcile.NoDrainLimit},
		{30 * time.Second, 30 * time.Second},
		{time.Hour, time.Hour},
	} {
		if got := drainLimit(tc.flag); got != tc.want {
			t.Errorf("drainLimit(%s) = %s, want %s", tc.flag, got, tc.want)
		}
	}
}
