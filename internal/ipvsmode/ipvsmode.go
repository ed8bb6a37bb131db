package ipvsmode

// DummyName is the dummy link the VIPs are bound on, as upstream names it.
const DummyName = "kube-ipvs0"

// Upstream kube-proxy's IPVS-mode chain names.
const (
	ChainServices             = "KUBE-SERVICES"
	ChainPostrouting          = "KUBE-POSTROUTING"
	ChainMarkMasq             = "KUBE-MARK-MASQ"
	ChainNodePort             = "KUBE-NODE-PORT"
	ChainLoadBalancer         = "KUBE-LOAD-BALANCER"
	ChainForward              = "KUBE-FORWARD"
	ChainProxyFirewall        = "KUBE-PROXY-FIREWALL"
	ChainSourceRangesFirewall = "KUBE-SOURCE-RANGES-FIREWALL"
	ChainIPVSFilter           = "KUBE-IPVS-FILTER"
	ChainIPVSOutFilter        = "KUBE-IPVS-OUT-FILTER"
)

// DefaultScheduler is the IPVS scheduler used when none is configured, as in kube-proxy.
const DefaultScheduler = "rr"

// Schedulers returns the IPVS schedulers of the Linux kernel (net/netfilter/ipvs, one module
// ip_vs_<name> each; twos since 6.7): the ones the kipvs.io/scheduler annotation takes.
// ipvs.scheduler takes any name, as kube-proxy's does, and the start-up probe loads it.
func Schedulers() []string {
	return []string{"rr", "wrr", "lc", "wlc", "fo", "ovf", "lblc", "lblcr", "dh", "sh", "mh", "sed", "nq", "twos"}
}

// The scheduler flags (kipvs.io/scheduler-flags), as ipvsadm names them: the sh and mh
// schedulers' IP_VS_SVC_F_SCHED1 (fallback) and IP_VS_SVC_F_SCHED2 (port).
const (
	FlagSHFallback = "sh-fallback"
	FlagSHPort     = "sh-port"
	FlagMHFallback = "mh-fallback"
	FlagMHPort     = "mh-port"
)

// SchedulerFlags returns the flags valid for a scheduler, nil for one that has none.
func SchedulerFlags(scheduler string) []string {
	switch scheduler {
	case "sh":
		return []string{FlagSHFallback, FlagSHPort}
	case "mh":
		return []string{FlagMHFallback, FlagMHPort}
	}
	return nil
}
