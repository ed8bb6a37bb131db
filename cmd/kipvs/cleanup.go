package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/vishvananda/netns"
	"go.uber.org/zap"

	"github.com/kipvs/kipvs/internal/config"
	"github.com/kipvs/kipvs/internal/daemon"
	"github.com/kipvs/kipvs/internal/dummyif"
	"github.com/kipvs/kipvs/internal/ipset"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/logging"
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
kube-proxy left in IPVS mode. It is idempotent; --dry-run prints the plan only.
It takes the same flags as run (only --config and --ipvs-exclude-cidrs matter).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			boot, _ := logging.New("console", 0)
			cfg, err := config.Load(flags, boot)
			if err != nil {
				return err
			}
			log, err := logging.New(string(cfg.LogFormat), cfg.Verbosity)
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
	v, err := ipvs.New(ns)
	if err != nil {
		return fmt.Errorf("open IPVS: %w", err)
	}
	defer v.Close()
	sets, err := ipset.New(ns)
	if err != nil {
		return fmt.Errorf("open ipset: %w", err)
	}
	defer sets.Close()
	dummy, err := dummyif.New(daemon.DummyName, ns)
	if err != nil {
		return err
	}
	defer dummy.Close()
	in := reconcile.CleanupInput{IPVS: v, IPSet: sets, Dummy: dummy, ExcludeCIDRs: cfg.IPVS.ExcludeCIDRs}
	backend, err := netfilter.Detect(ctx, netfilter.NewRunner(ns), "")
	if err != nil {
		return fmt.Errorf("find an iptables backend: %w", err)
	}
	for _, f := range []netfilter.Family{netfilter.IPv4, netfilter.IPv6} {
		h, err := netfilter.New(ns, f, backend)
		if err != nil {
			log.Warn("skipping rules of a family", zap.String("family", f.String()), zap.Error(err))
			continue
		}
		in.Netfilter = append(in.Netfilter, h)
	}
	host, err := daemon.HostAddrs(daemon.DummyName)
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
