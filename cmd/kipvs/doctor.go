package main

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kipvs/kipvs/internal/config"
	"github.com/kipvs/kipvs/internal/doctor"
	"github.com/kipvs/kipvs/internal/logging"
)

func newDoctorCommand() *cobra.Command {
	var flags *config.Flags
	var output, metricsAddr string
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check this node for what breaks kipvs and its Services (read-only)",
		Long: `doctor checks the node against the configuration kipvs would run with (the same flags
and --config file as run) and prints one line per check: its status (OK, WARN or FAIL), what
it found, naming the exact object and value, and how to fix it. It changes nothing.

It checks the kernel modules IPVS mode needs (ip_vs and the schedulers in use, ip_set and its
set types and xt_set with the iptables filter backend, nf_tables and the nft_* modules its
table uses with the nftables one, nf_conntrack, br_netfilter with a bridge) and ctnetlink;
with the nftables backend also nft (1.0.1 or later), the kernel release (5.6 or later) and
the tables ip kipvs and ip6 kipvs with their chains; what the other backend left; the
sysctls kipvs sets and those around it (rp_filter with an overlay, bridge-nf-call-iptables
and hairpin_mode with a bridge CNI, the conntrack table's fill); a missing local-traffic
detector, a clusterCIDR that is or overlaps the Service CIDR, a node address bound on
kube-ipvs0, routes that send VIPs or the Service CIDR off the node; a FORWARD policy of DROP
without kipvs's KUBE-FORWARD jump (with nftables: any DROP in FORWARD); and, when a kipvs daemon serves metrics on --metrics-bind-address, drift
between what it wants and the kernel (ipsets or nftables sets, chains, kube-ipvs0, virtual
servers), foreign virtual servers on its addresses and real servers draining past the
graceful period.

The filter backend is the daemon's; without a daemon that says, what the node holds (table
ip kipvs and no KUBE-* ipset: nftables), else --kipvs-filter-backend.

The Service CIDR comes from --kipvs-service-cidr, else the API's ServiceCIDR objects (with
--kubeconfig), else the daemon. doctor exits 1 when a check FAILs.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "" && output != "table" && output != "json" {
				return fmt.Errorf("--output %q: want table or json", output)
			}
			cfg, err := loadDoctorConfig(cmd.Flags(), flags)
			if err != nil {
				return err
			}
			addr := metricsAddr
			if !cmd.Flags().Changed("daemon-address") {
				addr = ""
				if a := cfg.MetricsBindAddress; a.IsValid() {
					addr = daemonAddress(a)
				}
			}
			view, closeView := doctor.NewRealView(cmd.Context(), doctor.RealOptions{MetricsAddress: addr, ServiceCIDRs: doctorServiceCIDRs(&cfg)})
			defer closeView()
			rep := doctor.Run(cmd.Context(), &cfg, view)
			out := cmd.OutOrStdout()
			if output == "json" {
				err = rep.WriteJSON(out)
			} else {
				err = rep.WriteTable(out)
			}
			if err != nil {
				return err
			}
			if rep.Failed() {
				return fmt.Errorf("doctor: %d check(s) failed", rep.Count(doctor.Fail))
			}
			return nil
		},
	}
	flags = config.AddFlags(cmd.Flags())
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	cmd.Flags().StringVar(&metricsAddr, "daemon-address", "", "where the running kipvs daemon serves metrics (default: --metrics-bind-address, with 127.0.0.1 for an unspecified address)")
	return cmd
}

// daemonAddress is where to reach a metrics server bound to a: its address, or loopback
// when it listens on every address.
func daemonAddress(a netip.AddrPort) string {
	ip := a.Addr()
	if ip.IsUnspecified() {
		if ip.Is6() {
			ip = netip.IPv6Loopback()
		} else {
			ip = netip.MustParseAddr("127.0.0.1")
		}
	}
	return netip.AddrPortFrom(ip, a.Port()).String()
}

// doctorServiceCIDRs lists the ServiceCIDR objects for doctor, nil when the configuration
// names no API server.
func doctorServiceCIDRs(cfg *config.Config) func(context.Context) ([]netip.Prefix, error) {
	client, ok := doctorAPIClient(cfg)
	if !ok {
		return nil
	}
	return func(ctx context.Context) ([]netip.Prefix, error) { return listServiceCIDRs(ctx, client) }
}

// doctorAPIClient builds an API client when the configuration names an API server
// (--kubeconfig, --master, or running in a cluster) and no source file replaces it.
func doctorAPIClient(cfg *config.Config) (kubernetes.Interface, bool) {
	cc := cfg.ClientConnection
	if cfg.Kipvs.SourceFile != "" || (cc.Kubeconfig == "" && cc.Master == "" && os.Getenv("KUBERNETES_SERVICE_HOST") == "") {
		return nil, false
	}
	rc, err := clientcmd.BuildConfigFromFlags(cc.Master, cc.Kubeconfig)
	if err != nil {
		return nil, false
	}
	rc.UserAgent = "kipvs-doctor"
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, false
	}
	return client, true
}

// listServiceCIDRs lists the ServiceCIDR objects' ranges; none when the API does not serve
// networking.k8s.io/v1 ServiceCIDR.
func listServiceCIDRs(ctx context.Context, client kubernetes.Interface) ([]netip.Prefix, error) {
	list, err := client.NetworkingV1().ServiceCIDRs().List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list ServiceCIDRs: %w", err)
	}
	var out []netip.Prefix
	for _, c := range list.Items {
		for i, s := range c.Spec.CIDRs {
			p, err := netip.ParsePrefix(s)
			if err != nil {
				return nil, fmt.Errorf("ServiceCIDR %s spec.cidrs[%d] %q: %w", c.Name, i, s, err)
			}
			out = append(out, p.Masked())
		}
	}
	return out, nil
}

// loadDoctorConfig is config.Load, except that a clusterCIDR overlapping
// --kipvs-service-cidr, which Load refuses, is kept: judging that mistake is doctor's job
// (its cluster CIDR check fails on it).
func loadDoctorConfig(fs *pflag.FlagSet, flags *config.Flags) (config.Config, error) {
	boot, _ := logging.New("text", 0, "")
	cfg, err := config.Load(flags, boot)
	if err == nil {
		return cfg, nil
	}
	f := fs.Lookup("kipvs-service-cidr")
	if f == nil || !f.Changed {
		return cfg, err
	}
	var svc []netip.Prefix
	for _, s := range strings.Split(f.Value.String(), ",") {
		p, perr := netip.ParsePrefix(strings.TrimSpace(s))
		if perr != nil {
			return cfg, err
		}
		svc = append(svc, p)
	}
	// Load again without the Service CIDR: if that is the only problem, the rest is valid.
	f.Changed = false
	defer func() { f.Changed = true }()
	cfg2, err2 := config.Load(flags, nil)
	if err2 != nil || config.CheckClusterCIDR(cfg2.ClusterCIDRs, svc) == nil {
		return cfg, err
	}
	cfg2.Kipvs.ServiceCIDRs = svc
	return cfg2, nil
}
