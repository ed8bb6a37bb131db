package netfilter

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/kerr"
	"os"
)

// Version is an iptables release, as `iptables --version` prints it ("iptables v1.8.7
// (nf_tables)").
type Version struct{ Major, Minor, Patch int }

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// AtLeast reports whether v is w or later.
func (v Version) AtLeast(w Version) bool {
	if v.Major != w.Major {
		return v.Major > w.Major
	}
	if v.Minor != w.Minor {
		return v.Minor > w.Minor
	}
	return v.Patch >= w.Patch
}

// RandomFullyMinVersion is the first iptables release whose MASQUERADE target takes
// --random-fully; upstream kube-proxy adds the option from this version on.
var RandomFullyMinVersion = Version{1, 6, 2}

// ParseVersion reads the version from a tool's --version output (`iptables --version`,
// `nft --version`): the first word that is "v" followed by dot-separated numbers (a missing
// minor or patch number is 0).
func ParseVersion(out string) (Version, error) {
	for _, w := range strings.Fields(out) {
		rest, ok := strings.CutPrefix(w, "v")
		if !ok || rest == "" {
			continue
		}
		parts := strings.Split(rest, ".")
		if len(parts) > 3 {
			parts = parts[:3]
		}
		var n [3]int
		valid := true
		for i, p := range parts {
			v, err := strconv.Atoi(p)
			if err != nil || v < 0 {
				valid = false
				break
			}
			n[i] = v
		}
		if valid {
			return Version{n[0], n[1], n[2]}, nil
		}
	}
	return Version{}, fmt.Errorf("no version in %q: %w", strings.TrimSpace(out), kerr.ErrInvalid)
}

// ToolVersion runs `<tool>-<mode> --version` (iptables or ip6tables of backend m) and parses
// its answer.
func ToolVersion(ctx context.Context, r Runner, f inet.Family, m Mode) (Version, error) {
	bin := tool(f) + "-" + string(m)
	out, err := r.Run(ctx, nil, bin, "--version")
	if err != nil {
		return Version{}, fmt.Errorf("%s --version: %w", bin, err)
	}
	v, err := ParseVersion(string(out))
	if err != nil {
		return Version{}, fmt.Errorf("%s --version: %w", bin, err)
	}
	return v, nil
}

// usable reports whether family f's iptables of backend m works on this node: it lists the
// nat table's POSTROUTING chain, as upstream's check that a family's iptables is present
// does. An IPv6 family whose ip6tables fails this is not run.
func usable(ctx context.Context, r Runner, f inet.Family, m Mode) error {
	bin := tool(f) + "-" + string(m)
	if _, err := r.Run(ctx, nil, bin, "-w", "5", "-t", "nat", "-S", "POSTROUTING"); err != nil {
		return fmt.Errorf("%s cannot list the nat table: %w", bin, err)
	}
	return nil
}

// IPv6Usable is upstream's test for running the IPv6 family: the kernel has IPv6
// (ifInet6, /proc/net/if_inet6, exists) and ip6tables works. The host needs no IPv6
// address. kipvs run applies it, and kipvs doctor too, to tell the families a daemon would run.
func IPv6Usable(ctx context.Context, r Runner, m Mode, ifInet6 string) error {
	if err := usable(ctx, r, inet.IPv6, m); err != nil {
		return err
	}
	if _, err := os.Stat(ifInet6); err != nil {
		return fmt.Errorf("the kernel has no IPv6 (%s): %w", ifInet6, err)
	}
	return nil
}
