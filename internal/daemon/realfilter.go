package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/vishvananda/netns"
	"go.uber.org/zap"

	"github.com/kipvs/kipvs/internal/config"
	"github.com/kipvs/kipvs/internal/dataplane"
	"github.com/kipvs/kipvs/internal/dataplane/iptables"
	"github.com/kipvs/kipvs/internal/dataplane/nftables"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipset"
	"github.com/kipvs/kipvs/internal/netfilter"
	"github.com/kipvs/kipvs/internal/nft"
	"github.com/kipvs/kipvs/internal/proxy"
)

// filterBackend is what the configured packet-filter backend gives the daemon.
type filterBackend struct {
	// filters opens a family's filter, one to write and one for the full syncs' reads.
	filters     func(inet.Family) (write, read dataplane.Filter, err error)
	ipv6        func() error
	randomFully func(inet.Family) bool
	// leftovers removes what kipvs (or kube-proxy) left with the other backend.
	leftovers func(context.Context) error
}

const ifInet6 = "/proc/net/if_inet6"

// newFilterBackend opens backend b in ns. The iptables backend runs the iptables programs
// and talks ipset over netlink (sets, readSets); the nftables backend runs nft only, and
// runs an iptables program only to remove KUBE-* chains when the node holds KUBE-* ipsets
// (what the iptables backend or kube-proxy's IPVS mode leaves).
func newFilterBackend(ctx context.Context, b config.FilterBackend, ns netns.NsHandle, sets, readSets ipset.Interface, log *zap.Logger, closers *[]func() error) (filterBackend, error) {
	if b == config.FilterNFTables {
		return nftBackend(ns, sets, log, closers)
	}
	runner := netfilter.NewRunner(ns)
	backend, err := netfilter.Detect(ctx, runner, "")
	if err != nil {
		return filterBackend{}, fmt.Errorf("find an iptables backend (install the iptables package, with iptables-restore): %w", err)
	}
	log.Info("iptables backend", zap.String("backend", backend.String()))
	return filterBackend{
		filters: func(f inet.Family) (dataplane.Filter, dataplane.Filter, error) {
			h, err := netfilter.New(ns, f, backend)
			if err != nil {
				return nil, nil, err
			}
			return iptables.New(f, sets, h), iptables.New(f, readSets, h), nil
		},
		ipv6: func() error { return netfilter.IPv6Usable(ctx, runner, backend.Mode, ifInet6) },
		randomFully: func(f inet.Family) bool {
			v, err := netfilter.ToolVersion(ctx, runner, f, backend.Mode)
			if err != nil {
				log.Warn("cannot read the iptables version; MASQUERADE is written without --random-fully", zap.String("ipFamily", f.String()), zap.Error(err))
				return false
			}
			return v.AtLeast(netfilter.RandomFullyMinVersion)
		},
		leftovers: func(ctx context.Context) error {
			var own []nft.Interface
			defer func() {
				for _, t := range own {
					_ = t.Close()
				}
			}()
			for _, f := range []inet.Family{inet.IPv4, inet.IPv6} {
				t, err := nft.New(ns, f)
				if err != nil {
					return nil // no nft: kipvs cannot have written a table
				}
				own = append(own, t)
			}
			return nftables.NewCleaner(own, nil).RemoveTables(ctx)
		},
	}, nil
}

// nftBackend opens the nftables backend; the tables' connections it opens are closed by
// closers, which RealDeps runs at exit.
func nftBackend(ns netns.NsHandle, sets ipset.Interface, log *zap.Logger, closers *[]func() error) (filterBackend, error) {
	probe, err := nft.New(ns, inet.IPv4)
	if err != nil {
		return filterBackend{}, fmt.Errorf("--kipvs-filter-backend=nftables needs the nft program (nftables 1.0.1 or later) and nf_tables in the kernel: %w", err)
	}
	_ = probe.Close()
	log.Info("nftables filter backend: tables ip kipvs and ip6 kipvs")
	return filterBackend{
		filters: func(f inet.Family) (dataplane.Filter, dataplane.Filter, error) {
			w, err := nft.New(ns, f)
			if err != nil {
				return nil, nil, err
			}
			*closers = append(*closers, w.Close)
			r, err := nft.New(ns, f)
			if err != nil {
				return nil, nil, err
			}
			*closers = append(*closers, r.Close)
			return nftables.New(w), nftables.New(r), nil
		},
		ipv6: func() error {
			if _, err := os.Stat(ifInet6); err != nil {
				return fmt.Errorf("the kernel has no IPv6 (%s): %w", ifInet6, err)
			}
			t, err := nft.New(ns, inet.IPv6)
			if err != nil {
				return err
			}
			return t.Close()
		},
		// nft writes masquerade fully-random on every kernel nf_tables runs on.
		randomFully: func(inet.Family) bool { return true },
		leftovers: func(ctx context.Context) error {
			names, err := sets.ListNames()
			if err != nil {
				return fmt.Errorf("list ipsets: %w", err)
			}
			if !holdsKubeSets(names) {
				return nil
			}
			handles, skipped, err := iptables.NodeRuleHandles(ctx, ns)
			if err != nil {
				return err
			}
			return errors.Join(append(skipped, removeAll(ctx, iptables.NewCleaner(sets, handles)))...)
		},
	}, nil
}

// holdsKubeSets reports whether one of the names is an ipset of the iptables backend.
func holdsKubeSets(names []string) bool {
	own := map[string]bool{}
	for _, f := range []inet.Family{inet.IPv4, inet.IPv6} {
		for _, s := range proxy.AllSets() {
			own[iptables.SetName(f, s)] = true
		}
	}
	for _, n := range names {
		if own[n] {
			return true
		}
	}
	return false
}

// removeAll removes every rule and set c owns (never a virtual server: they are the
// running backend's too).
func removeAll(ctx context.Context, c dataplane.Cleaner) error {
	o, err := c.Owned(ctx)
	if err != nil {
		return err
	}
	return errors.Join(c.RemoveRules(ctx, o.Rules), c.RemoveSets(o.Sets))
}
