package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/vishvananda/netns"
	"go.uber.org/zap"

	"github.com/kipvs/kipvs/internal/config"
	"github.com/kipvs/kipvs/internal/dataplane/iptables"
	"github.com/kipvs/kipvs/internal/dummyif"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipset"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/ipvsmode"
	"github.com/kipvs/kipvs/internal/kerr"
	"github.com/kipvs/kipvs/internal/netfilter"
	"github.com/kipvs/kipvs/internal/reconcile"
)

func newCleanupCommand() *cobra.Command {
	var flags *config.Flags
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "cleanup",
		Short: "Remove everything kipvs (or kube-proxy in IPVS mode) programmed on this node",
		Long: `cleanup removes kipvs's iptables and ip6tables rules and chains, the IPVS virtual servers
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
			return runCleanup(cmd.Context(), cfg, log, dryRun)
		},
	}
	flags = config.AddFlags(cmd.Flags())
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print what would be removed, change nothing")
	return cmd
}

// runCleanup is `kipvs cleanup` and `kipvs run --cleanup`.
func runCleanup(ctx context.Context, cfg config.Config, log *zap.Logger, dryRun bool) error {
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
	var rules []iptables.RuleHandle
	runner := netfilter.NewRunner(ns)
	backend, err := netfilter.Detect(ctx, runner, "")
	if err != nil {
		return fmt.Errorf("find an iptables backend: %w", err)
	}
	// The detected backend, and the other one too when it holds KUBE-* chains (kube-proxy
	// ran on it before, or the node's backend changed): both are cleaned.
	backends := []netfilter.Backend{backend}
	other := netfilter.ModeLegacy
	if backend.Mode == netfilter.ModeLegacy {
		other = netfilter.ModeNFT
	}
	if netfilter.HoldsKubeChains(ctx, runner, other) {
		backends = append(backends, netfilter.Backend{Mode: other, Reason: "it holds KUBE-* chains"})
	}
	for i, b := range backends {
		for _, f := range []inet.Family{inet.IPv4, inet.IPv6} {
			h, err := netfilter.New(ns, f, b)
			if err != nil {
				log.Warn("skipping rules of a family", zap.String("family", f.String()), zap.String("backend", string(b.Mode)), zap.Error(err))
				continue
			}
			name := map[inet.Family]string{inet.IPv4: "iptables", inet.IPv6: "ip6tables"}[f]
			if i > 0 {
				name += "-" + string(b.Mode)
			}
			rules = append(rules, iptables.RuleHandle{Name: name, NF: h})
		}
	}
	in.Filter = iptables.NewCleaner(sets, rules)
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
