package netfilter

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/kerr"
)

// Mode is an iptables backend: the nf_tables-based iptables-nft or the old iptables-legacy.
type Mode string

// The backends.
const (
	ModeNFT    Mode = "nft"
	ModeLegacy Mode = "legacy"
)

// Backend is the chosen backend and why it was chosen (for the log and `kipvs status`).
type Backend struct {
	Mode   Mode
	Reason string
}

func (b Backend) String() string { return fmt.Sprintf("%s (%s)", b.Mode, b.Reason) }

// Detect chooses the backend the way upstream's iptables wrapper does, for both families at
// once, so kipvs writes its rules where the node's other rules (kubelet's, the CNI's, kube-proxy's)
// already are. With override set it returns it. Otherwise, in order:
//
//  1. kubelet's hint chain (KUBE-IPTABLES-HINT or KUBE-KUBELET-CANARY) in the mangle table of
//     iptables-nft: nft;
//  2. a hint chain in any table of iptables-legacy: legacy;
//  3. KUBE-* chains in only one of the two (kube-proxy's or kipvs's own chains): that one;
//  4. more rules in legacy than in nft: legacy; otherwise nft (the default on an empty node).
//
// A backend whose binaries are missing is never chosen. r runs the *-save binaries (in the
// target namespace); iptables-legacy-save is run without -t, which would create tables.
func Detect(ctx context.Context, r Runner, override Mode) (Backend, error) {
	switch override {
	case ModeNFT, ModeLegacy:
		return Backend{Mode: override, Reason: "explicit override"}, nil
	case "":
	default:
		return Backend{}, fmt.Errorf("detect iptables backend: override %q: %w", override, kerr.ErrInvalid)
	}
	nft, nftOK := readAll(ctx, r, ModeNFT)
	legacy, legacyOK := readAll(ctx, r, ModeLegacy)
	switch {
	case !nftOK && !legacyOK:
		return Backend{}, fmt.Errorf("detect iptables backend: neither iptables-nft-save nor iptables-legacy-save can be run: %w", kerr.ErrNotFound)
	case !legacyOK:
		return Backend{Mode: ModeNFT, Reason: "iptables-legacy is not installed"}, nil
	case !nftOK:
		return Backend{Mode: ModeLegacy, Reason: "iptables-nft is not installed"}, nil
	}
	if h := findHint(section(nft, "mangle")); h != "" {
		return Backend{Mode: ModeNFT, Reason: "kubelet's " + h + " chain is in the iptables-nft mangle table"}, nil
	}
	if h := findHint(legacy); h != "" {
		return Backend{Mode: ModeLegacy, Reason: "kubelet's " + h + " chain is in iptables-legacy"}, nil
	}
	nk, lk := countPrefix(nft, ":KUBE-"), countPrefix(legacy, ":KUBE-")
	switch {
	case lk > 0 && nk == 0:
		return Backend{Mode: ModeLegacy, Reason: fmt.Sprintf("%d KUBE-* chains in iptables-legacy, none in iptables-nft", lk)}, nil
	case nk > 0 && lk == 0:
		return Backend{Mode: ModeNFT, Reason: fmt.Sprintf("%d KUBE-* chains in iptables-nft, none in iptables-legacy", nk)}, nil
	}
	nr, lr := countPrefix(nft, "-"), countPrefix(legacy, "-")
	if lr > nr {
		return Backend{Mode: ModeLegacy, Reason: fmt.Sprintf("iptables-legacy holds more rules (%d) than iptables-nft (%d)", lr, nr)}, nil
	}
	return Backend{Mode: ModeNFT, Reason: fmt.Sprintf("iptables-nft holds at least as many rules (%d) as iptables-legacy (%d)", nr, lr)}, nil
}

// HoldsKubeChains reports whether backend m is installed and has KUBE-* chains in either
// family (kube-proxy's or kipvs's, or kubelet's). It reads the *-save output without -t, so
// it creates no table on a backend nobody uses.
func HoldsKubeChains(ctx context.Context, r Runner, m Mode) bool {
	out, ok := readAll(ctx, r, m)
	return ok && countPrefix(out, ":KUBE-") > 0
}

// readAll returns the save output of both families of one backend, and whether the backend is
// installed. Save failures other than a missing binary count as empty output, as upstream does.
func readAll(ctx context.Context, r Runner, m Mode) (string, bool) {
	var all strings.Builder
	ok := true
	for _, f := range []inet.Family{inet.IPv4, inet.IPv6} {
		out, err := r.Run(ctx, nil, tool(f)+"-"+string(m)+"-save")
		if err != nil {
			if f == inet.IPv4 && errors.Is(err, exec.ErrNotFound) {
				ok = false
			}
			continue
		}
		all.Write(out)
		all.WriteByte('\n')
	}
	return all.String(), ok
}

// section returns the lines of one table's sections in save output.
func section(save, table string) string {
	var b strings.Builder
	in := false
	for _, l := range strings.Split(save, "\n") {
		switch {
		case strings.HasPrefix(l, "*"):
			in = l == "*"+table
		case l == "COMMIT":
			in = false
		case in:
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// findHint returns the first of the chains kubelet (1.17 and later) creates in the mangle table
// of the backend the node uses, KUBE-IPTABLES-HINT and KUBE-KUBELET-CANARY, declared in save.
func findHint(save string) string {
	for _, l := range strings.Split(save, "\n") {
		for _, h := range []string{":KUBE-IPTABLES-HINT ", ":KUBE-KUBELET-CANARY "} {
			if strings.HasPrefix(l, h) {
				return strings.TrimSpace(strings.TrimPrefix(h, ":"))
			}
		}
	}
	return ""
}

// countPrefix counts save lines starting with prefix ("-" counts rules, with or without -c).
func countPrefix(save, prefix string) int {
	n := 0
	for _, l := range strings.Split(save, "\n") {
		if strings.HasPrefix(l, "[") {
			if _, rest, ok := strings.Cut(l, "] "); ok {
				l = rest
			}
		}
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}
