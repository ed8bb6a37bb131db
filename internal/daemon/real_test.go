package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kipvs/kipvs/internal/netfilter"
)

// IPv6Usable is upstream's condition: ip6tables works and /proc/net/if_inet6 exists. The
// host's addresses do not matter.
func TestIPv6Usable(t *testing.T) {
	dir := t.TempDir()
	present := filepath.Join(dir, "if_inet6")
	if err := os.WriteFile(present, nil, 0o600); err != nil { // an empty file: IPv6 with no address yet
		t.Fatal(err)
	}
	ok := netfilter.RunnerFunc(func(_ context.Context, _ []byte, name string, args ...string) ([]byte, error) {
		if name != "ip6tables-legacy" || strings.Join(args, " ") != "-w 5 -t nat -S POSTROUTING" {
			t.Errorf("ran %s %v", name, args)
		}
		return []byte("-P POSTROUTING ACCEPT\n"), nil
	})
	broken := netfilter.RunnerFunc(func(context.Context, []byte, string, ...string) ([]byte, error) {
		return nil, errors.New("exit status 3")
	})
	ctx := context.Background()
	if err := IPv6Usable(ctx, ok, netfilter.ModeLegacy, present); err != nil {
		t.Errorf("ip6tables works, if_inet6 exists: %v", err)
	}
	if err := IPv6Usable(ctx, ok, netfilter.ModeLegacy, filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "the kernel has no IPv6") {
		t.Errorf("no if_inet6: %v", err)
	}
	if err := IPv6Usable(ctx, broken, netfilter.ModeLegacy, present); err == nil || !strings.Contains(err.Error(), "ip6tables-legacy cannot list the nat table") {
		t.Errorf("broken ip6tables: %v", err)
	}
}
