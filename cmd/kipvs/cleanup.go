package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/vishvananda/netns"
	"go.uber.org/zap"

	"github.com/kipvs/kipvs/internal/config"
	"github.com/kipvs/kipvs/internal/dataplane"
	"github.com/kipvs/kipvs/internal/dataplane/iptables"
	"github.com/kipvs/kipvs/internal/dataplane/nftables"
	"github.com/kipvs/kipvs/internal/dummyif"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipset"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/ipvsmode"
	"github.com/kipvs/kipvs/internal/kerr"
	"github.com/kipvs/kipvs/internal/nft"
	"github.com/kipvs/kipvs/internal/reconcile"
)

func newCleanupCommand() *cobra.Command {
	var flags *config.Flags
	var dryRun, includeKubeProxyNFT bool
	cmd := &cobra.Command{
		Use:   "cleanup",
		Short: "Remove everything kipvs (or kube-proxy in IPVS mode) programmed on this node",
		Long: `cleanup removes kipvs's iptables and ip6tables rules and chains, its nftables tables (ip kipvs,
ip6 kipvs: the nftables filter backend's), the IPVS virtual servers
whose VIPs are bound on kube-ipvs0 or listed in kipvs's sets (never foreign ones, never
those inside --ipvs-exclude-cidrs), the kube-ipvs0 link, and the KUBE-* ipsets, in the
order the kernel requires. The names are upstream kube-proxy's, so it also removes state
kube-proxy left in IPVS mode. Rules are removed on the iptables backend run would use, and
on the other one (nft or legacy) too when it holds KUBE-* chains. Without ip_vs in the
kernel there is no virtual server, and the rest is removed all the same. It is idempotent;
--dry-run prints the plan only.
It takes the same flags as run (only --config and --ipvs-exclude-cidrs matter; with --config,
as with run, the file's ipvs.excludeCIDRs counts and the flag is ignored).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, log, err := boot(flags)
			if err != nil {
				return err
			}
			return runCleanup(cmd.Context(), cfg, log, dryRun, includeKubeProxyNFT)
		},
	}
	flags = config.AddFlags(cmd.Flags())
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print what would be removed, change nothing")
	cmd.Flags().BoolVar(&includeKubeProxyNFT, "include-kube-proxy-nftables", false,
		"also delete kube-proxy's nftables-mode tables (ip kube-proxy, ip6 kube-proxy), which kipvs never touches otherwise")
	return cmd
}

// runCleanup is `kipvs cleanup` and `kipvs run --cleanup`.
func runCleanup(ctx context.Context, cfg config.Config, log *zap.Logger, dryRun, includeKubeProxyNFT bool) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ns := netns.None()
	in := reconcile.CleanupInput{ExcludeCIDRs: cfg.IPVS.ExcludeCIDRs}
	switch v, err := ipvs.New(ns); {
	case kerr.IsNotFound(err):
		// No ip_vs in the kernel: no virtual server exists, but rules, sets and the
		// link may (a node where ip_vs was unloaded, or never loaded after a reboot).
		log.Warn("the kernel has no IPVS (ip_vs not loaded); no virtual server to delete", zap.Error(err))
	case err != nil:
		return fmt.Errorf("open IPVS: %w", err)
	default:
		defer v.Close()
		in.IPVS = v
	}
	sets, err := ipset.New(ns)
	if err != nil {
		return fmt.Errorf("open ipset: %w", err)
	}
	defer sets.Close()
	dummy, err := dummyif.New(ipvsmode.DummyName, ns)
	if err != nil {
		return err
	}
	defer dummy.Close()
	in.Dummy = dummy
	in.Filter = nodeCleaner(ctx, ns, sets, log, includeKubeProxyNFT)
	host, err := dummyif.HostAddrs(ipvsmode.DummyName)
	if err != nil {
		return err
	}
	in.NodeAddrs = host
	plan, err := reconcile.PlanCleanup(ctx, in)
	if err != nil {
		return err
	}
	fmt.Fprint(os.Stdout, plan.String())
	if dryRun || plan.Empty() {
		return nil
	}
	if err := reconcile.ExecuteCleanup(ctx, in, plan); err != nil {
		return err
	}
	log.Info("cleanup done")
	return nil
}

// nodeCleaner is the cleaner of both filter backends' objects on the node: the iptables
// backend's rules and ipsets, and the nftables backend's tables (kube-proxy's nftables-mode
// tables too when includeKubeProxyNFT). A backend whose program is missing is skipped with
// a warning: with no iptables there is no iptables rule, the ipsets are removed over netlink
// all the same; with no nft kipvs cannot have written a table.
func nodeCleaner(ctx context.Context, ns netns.NsHandle, sets ipset.Interface, log *zap.Logger, includeKubeProxyNFT bool) dataplane.Cleaner {
	handles, skipped, err := iptables.NodeRuleHandles(ctx, ns)
	if err != nil {
		log.Warn("no iptables rule is removed", zap.Error(err))
	}
	for _, err := range skipped {
		log.Warn("skipping rules of a family", zap.Error(err))
	}
	var own, foreign []nft.Interface
	for _, f := range []inet.Family{inet.IPv4, inet.IPv6} {
		t, err := nft.New(ns, f)
		if err != nil {
			log.Warn("no nftables table is removed", zap.String("family", f.String()), zap.Error(err))
			continue
		}
		own = append(own, t)
		if includeKubeProxyNFT {
			kp, err := nft.NewTable(ns, f, "kube-proxy")
			if err != nil {
				log.Warn("kube-proxy's nftables table is not removed", zap.String("family", f.String()), zap.Error(err))
				continue
			}
			foreign = append(foreign, kp)
		}
	}
	return dataplane.JoinCleaners(iptables.NewCleaner(sets, handles), nftables.NewCleaner(own, foreign))
}
