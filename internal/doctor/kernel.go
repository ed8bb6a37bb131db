package doctor

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kipvs/kipvs/internal/dataplane/iptables"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/proxy"
)

// checkIPVS: IPVS answers over generic netlink.
func (c *checkup) checkIPVS() {
	info, err := c.view.IPVS.Info()
	if err != nil {
		c.add("ipvs", Fail, fmt.Sprintf("IPVS does not answer over generic netlink: %v", err),
			"modprobe ip_vs (or use a kernel built with CONFIG_IP_VS)")
		return
	}
	c.add("ipvs", OK, fmt.Sprintf("IP Virtual Server version %s (size=%d)", info.VersionString(), info.ConnTableSize), "")
}

// module is a kernel module kipvs needs, why, and how bad its absence is.
type module struct {
	name, why string
	severity  Status
	// unavailable is set when the daemon's probe found a scheduler unavailable.
	unavailable bool
}

// requiredModules lists the modules the configuration and the daemon's Services need: ip_vs
// and the schedulers in use; with the iptables backend ip_set, the set types kipvs creates
// and xt_set, with the nftables backend nf_tables and the expressions its table uses;
// nf_conntrack, and br_netfilter when the node has a bridge.
func (c *checkup) requiredModules() []module {
	sched := c.cfg.IPVS.SchedulerName()
	mods := []module{
		{name: "ip_vs", why: "IPVS", severity: Fail},
		{name: "ip_vs_" + sched, why: "the configured IPVS scheduler " + sched + " (--ipvs-scheduler)", severity: Fail},
	}
	if c.state != nil {
		names := make([]string, 0, len(c.state.Schedulers))
		for s := range c.state.Schedulers {
			names = append(names, s)
		}
		slices.Sort(names)
		for _, s := range names {
			if s == sched || s == "" {
				continue
			}
			mods = append(mods, module{name: "ip_vs_" + s, severity: Warn, unavailable: !c.state.Schedulers[s],
				why: "scheduler " + s + " asked for by Services (" + proxy.AnnotationScheduler + "); without it they fall back to " + sched})
		}
	}
	if c.nftables() {
		mods = append(mods, c.nftModules()...)
	} else {
		mods = append(mods, module{name: "ip_set", why: "the KUBE-* ipsets", severity: Fail})
		seen := map[string]bool{}
		for _, set := range proxy.AllSets() {
			s := iptables.IPSet(inet.IPv4, set)
			name := "ip_set_" + strings.NewReplacer(":", "_", ",", "").Replace(string(s.Type))
			if !seen[name] {
				seen[name] = true
				mods = append(mods, module{name: name, why: "ipsets of type " + string(s.Type) + " (" + s.Name + ")", severity: Fail})
			}
		}
		mods = append(mods, module{name: "xt_set", why: "iptables rules matching the KUBE-* ipsets (-m set)", severity: Fail})
	}
	mods = append(mods, module{name: "nf_conntrack", why: "connection tracking (IPVS NAT with net.ipv4.vs.conntrack=1, masquerading)", severity: Fail})
	if c.hasBridge() {
		mods = append(mods, module{name: "br_netfilter", severity: Fail,
			why: "bridged traffic to pass the packet filter and conntrack (replies from a Service's pod to a client pod on the same bridge)"})
	}
	return mods
}

// checkModules: each required module is loaded, built in or installed.
func (c *checkup) checkModules() {
	for _, m := range c.requiredModules() {
		check := "module " + m.name
		fix := "modprobe " + m.name + " (install the kernel's modules package if modprobe cannot find it)"
		if m.name == "br_netfilter" {
			fix = "modprobe br_netfilter and add it to /etc/modules-load.d/ so it loads at boot"
		}
		state := c.view.Modules.Module(m.name)
		switch state {
		case ModuleLoaded, ModuleBuiltin, ModuleAvailable:
			if m.unavailable {
				c.add(check, Warn, fmt.Sprintf("%s is %s now, but the daemon found it unavailable when a Service first asked for it: Services asking for it use the global scheduler until kipvs restarts", m.name, state),
					"restart kipvs so it probes the scheduler again")
				continue
			}
			note := ""
			if state == ModuleAvailable {
				note = ", the kernel loads it on first use"
			}
			c.add(check, OK, fmt.Sprintf("%s %s%s (needed for %s)", m.name, state, note, m.why), "")
		case ModuleUnknown:
			c.add(check, Warn, fmt.Sprintf("%s is not loaded, and /lib/modules for kernel %s is not readable to tell whether it is installed (needed for %s)", m.name, c.view.KernelRelease, m.why), fix)
		default:
			c.add(check, m.severity, fmt.Sprintf("%s is not loaded, not built in and not installed for kernel %s (needed for %s)", m.name, c.view.KernelRelease, m.why), fix)
		}
	}
}

// hasBridge reports whether the node has a bridge link.
func (c *checkup) hasBridge() bool {
	for _, l := range c.links {
		if l.Kind == "bridge" {
			return true
		}
	}
	return false
}

// checkConntrackNetlink: ctnetlink answers (kipvs deletes stale UDP flows through it).
func (c *checkup) checkConntrackNetlink() {
	entries, _, err := c.view.Conntrack.Count()
	if err != nil {
		c.add("conntrack netlink", Warn, fmt.Sprintf("ctnetlink does not answer (%v): kipvs cannot delete conntrack flows of removed UDP endpoints, so UDP clients keep sending to dead pods until their flows time out", err),
			"modprobe nf_conntrack_netlink")
		return
	}
	c.add("conntrack netlink", OK, fmt.Sprintf("ctnetlink answers (%d flows)", entries), "")
}
