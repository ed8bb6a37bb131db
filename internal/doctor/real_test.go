package doctor

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vishvananda/netns"

	"github.com/kipvs/kipvs/internal/debugapi"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/kerr"
	"github.com/kipvs/kipvs/internal/netfilter"
	"github.com/kipvs/kipvs/internal/server"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestFSModules(t *testing.T) {
	root := t.TempDir()
	m := &FSModules{Proc: filepath.Join(root, "proc"), Sys: filepath.Join(root, "sys"), Lib: filepath.Join(root, "lib/modules/6.1.0")}
	writeFile(t, filepath.Join(m.Proc, "modules"), "ip_vs_rr 16384 1 - Live 0x0000000000000000\nip_vs 192512 3 ip_vs_rr, Live 0x0000000000000000\n")
	writeFile(t, filepath.Join(m.Sys, "module/nf_conntrack/parameters/hashsize"), "65536\n")
	writeFile(t, filepath.Join(m.Lib, "modules.builtin"), "kernel/net/bridge/br_netfilter.ko\n")
	writeFile(t, filepath.Join(m.Lib, "modules.dep"), "kernel/net/netfilter/ipset/ip_set_hash_ipportnet.ko.xz: kernel/net/netfilter/ipset/ip_set.ko.xz\n"+
		"kernel/net/netfilter/xt_set.ko.zst: kernel/net/netfilter/ipset/ip_set.ko.zst\n")
	for name, want := range map[string]ModuleState{
		"ip_vs": ModuleLoaded, "ip_vs_rr": ModuleLoaded, "nf_conntrack": ModuleBuiltin, "br_netfilter": ModuleBuiltin,
		"ip_set_hash_ipportnet": ModuleAvailable, "xt_set": ModuleAvailable, "ip_vs_mh": ModuleMissing,
	} {
		if got := m.Module(name); got != want {
			t.Errorf("Module(%s) = %s, want %s", name, got, want)
		}
	}
	// No /lib/modules for the running kernel (a container): not loaded is unknown.
	m.Lib = filepath.Join(root, "lib/modules/none")
	if got := m.Module("ip_vs_mh"); got != ModuleUnknown {
		t.Errorf("without /lib/modules: %s, want unknown", got)
	}
	if got := m.Module("ip_vs"); got != ModuleLoaded {
		t.Errorf("without /lib/modules, a loaded module: %s", got)
	}
}

// iptablesReader runs only the backend's -save binary, and Owned parses its output the
// netfilter way.
func TestIptablesReader(t *testing.T) {
	save := `*filter
:INPUT ACCEPT [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
:KUBE-FORWARD - [0:0]
:DOCKER - [0:0]
[3:180] -A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD
[0:0] -A FORWARD -j DOCKER
[0:0] -A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
COMMIT
`
	var ran []string
	runner := netfilter.RunnerFunc(func(_ context.Context, stdin []byte, name string, args ...string) ([]byte, error) {
		ran = append(ran, name+" "+strings.Join(args, " "))
		if stdin != nil || name != "ip6tables-legacy-save" {
			return nil, errors.New("unexpected command")
		}
		return []byte(save), nil
	})
	r := &iptablesReader{runner: runner, family: inet.IPv6, backend: netfilter.Backend{Mode: netfilter.ModeLegacy}}
	got, err := r.Save(t.Context())
	if err != nil || got != save {
		t.Fatalf("Save = %q, %v", got, err)
	}
	owned, err := r.Owned(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := "*filter\n:KUBE-FORWARD - [0:0]\n-A FORWARD -m comment --comment \"kubernetes forwarding rules\" -j KUBE-FORWARD\n" +
		"-A KUBE-FORWARD -m comment --comment \"kubernetes forwarding conntrack rule\" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT\nCOMMIT\n"
	if owned != want {
		t.Errorf("Owned:\n%s\nwant:\n%s", owned, want)
	}
	for _, c := range ran {
		if c != "ip6tables-legacy-save -c" {
			t.Errorf("ran %q", c)
		}
	}
}

func TestHTTPDaemon(t *testing.T) {
	st := debugapi.State{Dummy: "kube-ipvs0", GracefulPeriod: "30s", Families: []debugapi.FamilyState{{Family: "IPv4", Synced: true}}}
	mux := http.NewServeMux()
	mux.Handle(debugapi.StatePath, server.StateHandler(func() debugapi.State { return st }))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	d := &httpDaemon{addr: addr, client: srv.Client()}
	got, err := d.State(t.Context())
	if err != nil || got.Dummy != "kube-ipvs0" || len(got.Families) != 1 || !got.Families[0].Synced {
		t.Fatalf("State = %+v, %v", got, err)
	}
	if d.Address() != addr {
		t.Errorf("Address = %s", d.Address())
	}

	// kube-proxy (or an older kipvs) on the port: no state endpoint.
	other := httptest.NewServer(http.NotFoundHandler())
	defer other.Close()
	d = &httpDaemon{addr: strings.TrimPrefix(other.URL, "http://"), client: other.Client()}
	if _, err := d.State(t.Context()); err == nil || errors.Is(err, ErrNoDaemon) || !strings.Contains(err.Error(), "kube-proxy") {
		t.Errorf("404: %v", err)
	}

	// kipvs without --kipvs-debug-endpoints.
	off := http.NewServeMux()
	server.HandleDebug(off, false, nil, nil)
	offSrv := httptest.NewServer(off)
	defer offSrv.Close()
	d = &httpDaemon{addr: strings.TrimPrefix(offSrv.URL, "http://"), client: offSrv.Client()}
	if _, err := d.State(t.Context()); !errors.Is(err, ErrDebugOff) {
		t.Errorf("debug endpoints off: %v, want ErrDebugOff", err)
	}

	// Nothing listening.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	d = &httpDaemon{addr: closed, client: &http.Client{}}
	if _, err := d.State(t.Context()); !errors.Is(err, ErrNoDaemon) {
		t.Errorf("closed port: %v", err)
	}

	// A broken document.
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("{")) }))
	defer bad.Close()
	d = &httpDaemon{addr: strings.TrimPrefix(bad.URL, "http://"), client: bad.Client()}
	if _, err := d.State(t.Context()); err == nil || errors.Is(err, ErrNoDaemon) || !strings.Contains(err.Error(), "decode") {
		t.Errorf("bad JSON: %v", err)
	}
}

// Without nf_tables in the kernel no nftables table can exist: both families read as no
// table, and nft is not run (its start-up check would load the module).
func TestOpenNFTWithoutNFTables(t *testing.T) {
	for _, state := range []ModuleState{ModuleMissing, ModuleAvailable, ModuleUnknown} {
		readers, err := openNFT(netns.None(), fakeModules{"nf_tables": state})
		if err != nil || len(readers) != 2 {
			t.Fatalf("nf_tables %s: %d readers, %v", state, len(readers), err)
		}
		for f, r := range readers {
			if _, ok := r.(noTable); !ok {
				t.Errorf("%s: nft opened (%T) without nf_tables", f, r)
			}
			if want := nftTableName(f); r.Name() != want {
				t.Errorf("%s: Name %q, want %q", f, r.Name(), want)
			}
			if _, err := r.Chains(t.Context()); !kerr.IsNotFound(err) {
				t.Errorf("%s: Chains: %v, want not found", f, err)
			}
			if _, err := r.Members(t.Context(), "cluster-ip"); !kerr.IsNotFound(err) {
				t.Errorf("%s: Members: %v, want not found", f, err)
			}
			if rules, err := r.Rules(t.Context()); rules != "" || err != nil {
				t.Errorf("%s: Rules = %q, %v", f, rules, err)
			}
		}
	}
}
