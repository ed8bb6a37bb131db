package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/kipvs/kipvs/internal/config"
)

func kubeconfigFor(t *testing.T, server string) config.Config {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, server)
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := config.Defaults()
	cfg.ClientConnection.Kubeconfig = path
	return cfg
}

// A kubeconfig naming the apiserver by a host name has it resolved once at start, through
// the injected resolver (no DNS here); an IP is taken as it is, without a lookup; a failed
// lookup leaves none (default/kubernetes's endpoints still guard the apiserver).
func TestAPIServerHostNameResolvedAtStart(t *testing.T) {
	var asked []string
	resolver := func(answer []netip.Addr, err error) Resolver {
		return func(_ context.Context, network, host string) ([]netip.Addr, error) {
			asked = append(asked, network+" "+host)
			return answer, err
		}
	}
	a := netip.MustParseAddr
	for _, tc := range []struct {
		server    string
		answer    []netip.Addr
		err       error
		want      string
		wantAsked string
	}{
		{"https://api.example.test:6443", []netip.Addr{a("fd00:1::100"), a("::ffff:192.168.1.100"), a("192.168.1.100")}, nil, "[192.168.1.100 fd00:1::100]", "[ip api.example.test]"},
		{"https://192.168.1.100:6443", nil, errors.New("must not be asked"), "[192.168.1.100]", "[]"},
		{"https://api.example.test:6443", nil, errors.New("no such host"), "[]", "[ip api.example.test]"},
	} {
		asked = nil
		cfg := kubeconfigFor(t, tc.server)
		got := apiServerAddrs(t.Context(), &cfg, zaptest.NewLogger(t), resolver(tc.answer, tc.err))
		if fmt.Sprint(got) != tc.want || fmt.Sprint(asked) != tc.wantAsked {
			t.Errorf("%s: addresses %v (want %s), lookups %v (want %s)", tc.server, got, tc.want, asked, tc.wantAsked)
		}
	}
}
