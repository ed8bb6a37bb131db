package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/kipvs/kipvs/internal/netfilter"
	"github.com/kipvs/kipvs/internal/testutil/poll"
)

// What the other filter backend left is removed once, after the first sync has programmed
// this backend's rules (never before: the node would be without rules in between), and a
// failure to remove it is logged, not fatal.
func TestRemoveLeftoversAfterTheFirstSync(t *testing.T) {
	for _, fail := range []bool{false, true} {
		t.Run(map[bool]string{false: "removed", true: "failed"}[fail], func(t *testing.T) {
			log := zaptest.NewLogger(t)
			path := filepath.Join(t.TempDir(), "s.yaml")
			if err := os.WriteFile(path, []byte(oneService), 0o644); err != nil {
				t.Fatal(err)
			}
			node := newFakeNode()
			deps := node.deps(startFileSource(t, t.Context(), path, log), prometheus.NewRegistry())
			var calls atomic.Int32
			var rulesThen atomic.Value
			deps.RemoveLeftovers = func(context.Context) error {
				calls.Add(1)
				rulesThen.Store(node.nf.Save(netfilter.TableNAT))
				if fail {
					return errors.New("nft: no such table")
				}
				return nil
			}
			cfg := testConfig(t)
			cfg.Kipvs.SourceFile = path
			d := startDaemon(t, cfg, log, deps)
			poll.Until(t, waitLimit, "the leftovers' removal", func() (bool, string) {
				return calls.Load() == 1, "not called"
			})
			if err := d.sync(t.Context(), true); err != nil {
				t.Fatal(err)
			}
			if err := d.stop(); err != nil {
				t.Fatal(err)
			}
			if n := calls.Load(); n != 1 {
				t.Errorf("called %d times, want once", n)
			}
			if r, _ := rulesThen.Load().(string); !strings.Contains(r, "KUBE-SERVICES") {
				t.Errorf("called before the rules were programmed; nat table then:\n%s", r)
			}
		})
	}
}
