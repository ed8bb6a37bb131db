package main

import (
	"github.com/spf13/cobra"
)

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "kipvs",
		Short: "kipvs programs Kubernetes Services into Linux IPVS (a drop-in replacement for kube-proxy's IPVS mode)",
		Long: `kipvs watches Services and EndpointSlices and programs the kernel: IPVS virtual servers
with the service VIPs bound on kube-ipvs0, the KUBE-* ipsets, a small set of iptables chains and
the sysctls IPVS needs. Kernel object names, flags, the config file and metric names match
kube-proxy's IPVS mode, so nodes migrate in either direction without disruption.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// Runnable, so that `kipvs --version` reaches the version flag's hook.
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	addVersionFlag(root)
	root.AddCommand(newVersionCommand(), newRunCommand(), newCleanupCommand(), newStatusCommand(), newDoctorCommand())
	return root
}
