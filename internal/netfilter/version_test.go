package netfilter

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/kerr"
)

func TestParseVersion(t *testing.T) {
	for _, tc := range []struct {
		out         string
		want        Version
		randomFully bool
	}{
		{"iptables v1.8.7 (nf_tables)\n", Version{1, 8, 7}, true},
		{"iptables v1.8.10 (legacy)\n", Version{1, 8, 10}, true},
		{"ip6tables v1.6.2\n", Version{1, 6, 2}, true},
		{"iptables v1.6.1\n", Version{1, 6, 1}, false},
		{"iptables v1.4.21", Version{1, 4, 21}, false},
		{"iptables v2", Version{2, 0, 0}, true},
		{"iptables-nft v1.8.9 (nf_tables): extra", Version{1, 8, 9}, true},
		{"nftables v1.0.6 (Lester Gooch #5)\n", Version{1, 0, 6}, false},
	} {
		got, err := ParseVersion(tc.out)
		if err != nil || got != tc.want {
			t.Errorf("ParseVersion(%q) = %v, %v; want %v", tc.out, got, err, tc.want)
		}
		if got.AtLeast(RandomFullyMinVersion) != tc.randomFully {
			t.Errorf("%v supports --random-fully: got %v, want %v", got, !tc.randomFully, tc.randomFully)
		}
	}
	for _, bad := range []string{"", "iptables", "iptables vx.y", "version 1.8.7"} {
		if v, err := ParseVersion(bad); !errors.Is(err, kerr.ErrInvalid) {
			t.Errorf("ParseVersion(%q) = %v, %v; want ErrInvalid", bad, v, err)
		}
	}
}

func TestToolVersionAndUsable(t *testing.T) {
	var ran []string
	r := RunnerFunc(func(_ context.Context, _ []byte, name string, args ...string) ([]byte, error) {
		ran = append(ran, name+" "+strings.Join(args, " "))
		switch name {
		case "iptables-nft":
			return []byte("iptables v1.8.9 (nf_tables)\n"), nil
		case "ip6tables-nft":
			return nil, &ExecError{Cmd: name, ExitCode: 3, Stderr: "can't initialize ip6tables table `nat'", Err: errors.New("exit status 3")}
		}
		return nil, &ExecError{Cmd: name, ExitCode: -1, Err: exec.ErrNotFound}
	})
	ctx := context.Background()
	if v, err := ToolVersion(ctx, r, inet.IPv4, ModeNFT); err != nil || v != (Version{1, 8, 9}) {
		t.Errorf("ToolVersion iptables-nft = %v, %v", v, err)
	}
	if _, err := ToolVersion(ctx, r, inet.IPv4, ModeLegacy); !errors.Is(err, exec.ErrNotFound) {
		t.Errorf("ToolVersion of a missing binary: %v", err)
	}
	if err := usable(ctx, r, inet.IPv4, ModeNFT); err != nil {
		t.Errorf("Usable iptables-nft: %v", err)
	}
	if err := usable(ctx, r, inet.IPv6, ModeNFT); err == nil || !strings.Contains(err.Error(), "ip6tables-nft cannot list the nat table") {
		t.Errorf("Usable ip6tables-nft: %v", err)
	}
	want := []string{"iptables-nft --version", "iptables-legacy --version", "iptables-nft -w 5 -t nat -S POSTROUTING", "ip6tables-nft -w 5 -t nat -S POSTROUTING"}
	if strings.Join(ran, "\n") != strings.Join(want, "\n") {
		t.Errorf("ran\n%s\nwant\n%s", strings.Join(ran, "\n"), strings.Join(want, "\n"))
	}
}

// IPv6Usable is upstream's condition: ip6tables works and /proc/net/if_inet6 exists. The
// host's addresses do not matter.
func TestIPv6Usable(t *testing.T) {
	dir := t.TempDir()
	present := filepath.Join(dir, "if_inet6")
	if err := os.WriteFile(present, nil, 0o600); err != nil { // an empty file: IPv6 with no address yet
		t.Fatal(err)
	}
	ok := RunnerFunc(func(_ context.Context, _ []byte, name string, args ...string) ([]byte, error) {
		if name != "ip6tables-legacy" || strings.Join(args, " ") != "-w 5 -t nat -S POSTROUTING" {
			t.Errorf("ran %s %v", name, args)
		}
		return []byte("-P POSTROUTING ACCEPT\n"), nil
	})
	broken := RunnerFunc(func(context.Context, []byte, string, ...string) ([]byte, error) {
		return nil, errors.New("exit status 3")
	})
	ctx := context.Background()
	if err := IPv6Usable(ctx, ok, ModeLegacy, present); err != nil {
		t.Errorf("ip6tables works, if_inet6 exists: %v", err)
	}
	if err := IPv6Usable(ctx, ok, ModeLegacy, filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "the kernel has no IPv6") {
		t.Errorf("no if_inet6: %v", err)
	}
	if err := IPv6Usable(ctx, broken, ModeLegacy, present); err == nil || !strings.Contains(err.Error(), "ip6tables-legacy cannot list the nat table") {
		t.Errorf("broken ip6tables: %v", err)
	}
}
