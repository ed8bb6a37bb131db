package netfilter

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/vishvananda/netns"

	"github.com/kipvs/kipvs/internal/inet"
)

// TestProgramsListsEverythingRun runs every path that execs an iptables program, for both
// families and backends, and wants each program it ran in Programs: the image recipe
// (hack/ociimage) ships exactly Programs, so a program missing there is missing on a node.
func TestProgramsListsEverythingRun(t *testing.T) {
	ctx := context.Background()
	for _, m := range []Mode{ModeNFT, ModeLegacy} {
		ran := map[string]bool{}
		r := RunnerFunc(func(_ context.Context, _ []byte, name string, _ ...string) ([]byte, error) {
			ran[name] = true
			return nil, errors.New("not run")
		})
		for _, f := range []inet.Family{inet.IPv4, inet.IPv6} {
			_, _ = ToolVersion(ctx, r, f, m)
			_ = usable(ctx, r, f, m)
			h, err := New(netns.None(), f, Backend{Mode: m}, WithRunner(r))
			if err != nil {
				t.Fatal(err)
			}
			_, _ = h.tables.Save(ctx)
			_ = h.tables.Restore(ctx, "*nat\nCOMMIT\n")
		}
		_ = HoldsKubeChains(ctx, r, m)
		_, _ = Detect(ctx, r, "")
		for name := range ran {
			if !slices.Contains(Programs(m), name) && !slices.Contains(Programs(otherMode(m)), name) {
				t.Errorf("%s ran %q, which Programs does not list: %v", m, name, Programs(m))
			}
		}
		for _, p := range Programs(m) {
			if !ran[p] {
				t.Errorf("Programs(%s) lists %q, which nothing ran", m, p)
			}
		}
	}
}

func otherMode(m Mode) Mode {
	if m == ModeNFT {
		return ModeLegacy
	}
	return ModeNFT
}
