package doctor

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvsmode"
	"github.com/kipvs/kipvs/internal/kerr"
)

// Keys the checks read besides the ones kipvs run sets.
const (
	keyConnReuse      = ipvsmode.SysctlConnReuseMode
	keyArpIgnoreAll   = ipvsmode.SysctlArpIgnoreAll
	keyBridgeIptables = "net/bridge/bridge-nf-call-iptables"
	keyBridgeIp6      = "net/bridge/bridge-nf-call-ip6tables"
	keyConntrackCount = "net/netfilter/nf_conntrack_count"
	keyConntrackMax   = ipvsmode.SysctlConntrackMax
)

// failReason says why a wrong value of key breaks Services outright (FAIL); a difference in
// any other value kipvs sets is a WARN.
func failReason(key string) (string, bool) {
	switch key {
	case ipvsmode.SysctlVSConntrack:
		return "without it IPVS creates no conntrack entries and masquerading of Service traffic fails", true
	case ipvsmode.SysctlIPForward:
		return "without it the node does not forward Service traffic to pods", true
	}
	return "", false
}

// dotted renders a slash key the way sysctl(8) writes it: dots between components, and a
// dot inside a component (an interface name such as eth0.100) as a slash.
func dotted(key string) string {
	parts := strings.Split(key, "/")
	for i, p := range parts {
		parts[i] = strings.ReplaceAll(p, ".", "/")
	}
	return strings.Join(parts, ".")
}

// moduleOf guesses which module provides a missing key, for the finding.
func moduleOf(key string) string {
	switch {
	case strings.HasPrefix(key, "net/ipv4/vs/"):
		return "ip_vs"
	case strings.HasPrefix(key, "net/netfilter/nf_conntrack"):
		return "nf_conntrack"
	case strings.HasPrefix(key, "net/bridge/"):
		return "br_netfilter"
	}
	return ""
}

// get reads a key; missing reports a key that does not exist.
func (c *checkup) get(key string) (value string, missing bool, err error) {
	v, err := c.view.Sysctl.Get(key)
	if kerr.IsNotFound(err) {
		return "", true, nil
	}
	return v, false, err
}

// checkSysctls: every sysctl kipvs run sets has its value (the rule of ipvsmode.DesiredSysctls:
// the configuration, the kernel version and the CPU count), and conn_reuse_mode is judged by
// the kernel version.
func (c *checkup) checkSysctls() {
	kv, err := ipvsmode.ParseKernelVersion(c.view.KernelRelease)
	if err != nil {
		c.add("sysctls", Warn, fmt.Sprintf("cannot tell which sysctls kipvs needs: %v", err), "")
		return
	}
	want, warnings := ipvsmode.DesiredSysctls(kv, c.cfg.SysctlOptions(c.view.NumCPU))
	reuseChecked := false
	for _, s := range want {
		if s.Key == keyConnReuse {
			reuseChecked = true
		}
		c.checkSysctl(s)
	}
	if reuseChecked {
		return
	}
	check := "sysctl " + dotted(keyConnReuse)
	if len(warnings) > 0 {
		c.add(check, Warn, strings.Join(warnings, "; "), "upgrade the kernel to 5.9 or later")
		return
	}
	v, missing, err := c.get(keyConnReuse)
	switch {
	case err != nil:
		c.add(check, Warn, fmt.Sprintf("cannot read %s: %v", dotted(keyConnReuse), err), "")
	case missing:
		c.add(check, Fail, fmt.Sprintf("%s does not exist (ip_vs not loaded)", dotted(keyConnReuse)), "modprobe ip_vs")
	default:
		c.add(check, OK, fmt.Sprintf("%s = %s; kernel %s (5.9 or later) needs no change: its own setting avoids both the 1 s stall on port reuse and the rolling-update resets", dotted(keyConnReuse), v, c.view.KernelRelease), "")
	}
}

// checkSysctl compares one wanted sysctl with the node.
func (c *checkup) checkSysctl(s ipvsmode.Sysctl) {
	name := dotted(s.Key)
	check := "sysctl " + name
	severity := Warn
	why := s.Why
	if w, ok := failReason(s.Key); ok {
		severity, why = Fail, w
	}
	fix := fmt.Sprintf("sysctl -w %s=%s (kipvs run sets it at start)", name, s.Value)
	v, missing, err := c.get(s.Key)
	switch {
	case err != nil:
		c.add(check, Warn, fmt.Sprintf("cannot read %s: %v", name, err), "")
		return
	case missing:
		mod := moduleOf(s.Key)
		if mod == "" {
			c.add(check, severity, fmt.Sprintf("%s does not exist (kipvs needs %s: %s)", name, s.Value, why), "use a kernel that has "+name)
			return
		}
		c.add(check, severity, fmt.Sprintf("%s does not exist (%s not loaded); kipvs needs %s: %s", name, mod, s.Value, why), "modprobe "+mod+", then "+fix)
		return
	}
	if s.Key == keyConntrackMax {
		// kipvs raises the limit; a larger one is as good.
		cur, err1 := strconv.Atoi(v)
		min, err2 := strconv.Atoi(s.Value)
		if err1 == nil && err2 == nil && cur >= min {
			c.add(check, OK, fmt.Sprintf("%s = %s (kipvs wants at least %s: %s)", name, v, s.Value, s.Why), "")
			return
		}
	}
	if v == s.Value {
		c.add(check, OK, fmt.Sprintf("%s = %s", name, v), "")
		return
	}
	c.add(check, severity, fmt.Sprintf("%s = %s, kipvs needs %s: %s", name, v, s.Value, why), fix)
}

// lbAddresses returns the LoadBalancer and external IPs bound on kube-ipvs0, each with a
// label naming its Service when the daemon says (without a daemon: the kube-ipvs0
// addresses outside the Service CIDRs), and whether they could be told apart at all.
func (c *checkup) lbAddresses() ([]netip.Addr, map[netip.Addr]string, bool) {
	bound := c.dummyAddrs()
	var out []netip.Addr
	labels := map[netip.Addr]string{}
	if c.state != nil {
		for _, f := range c.state.Families {
			for _, v := range f.VirtualServers {
				a, err := netip.ParseAddr(v.Address)
				if err == nil && (v.Kind == "LoadBalancer" || v.Kind == "ExternalIP") {
					labels[a] = v.Kind + " of " + v.Namespace + "/" + v.Name
				}
			}
		}
		for _, a := range bound {
			if _, ok := labels[a]; ok {
				out = append(out, a)
			}
		}
		return out, labels, true
	}
	if len(c.svcCIDRs) == 0 {
		return nil, labels, len(bound) == 0
	}
	for _, a := range bound {
		if !c.inServiceCIDR(a) {
			out = append(out, a)
		}
	}
	return out, labels, true
}

// checkARP: without strictARP, LoadBalancer and external IPs bound on kube-ipvs0 are
// answered for by ARP on every link unless arp_ignore says otherwise. (With strictARP the
// sysctl checks cover arp_ignore and arp_announce.)
func (c *checkup) checkARP() {
	if c.cfg.IPVS.StrictARP || !c.hasFamily(inet.IPv4) {
		return
	}
	const check = "ARP for LoadBalancer IPs"
	lbs, labels, known := c.lbAddresses()
	if !known {
		c.add(check, OK, "cannot tell LoadBalancer IPs from cluster IPs on "+ipvsmode.DummyName+" (no daemon, no Service CIDR); not checked", "")
		return
	}
	var lb4 []string
	for _, a := range lbs {
		if a.Is4() {
			s := a.String()
			if l := labels[a]; l != "" {
				s += " (" + l + ")"
			}
			lb4 = append(lb4, s)
		}
	}
	if len(lb4) == 0 {
		c.add(check, OK, "no LoadBalancer or external IPs bound on "+ipvsmode.DummyName, "")
		return
	}
	v, _, err := c.get(keyArpIgnoreAll)
	if err == nil && v != "" && v != "0" {
		c.add(check, OK, fmt.Sprintf("%s = %s: the node does not answer ARP on other links for the %d LoadBalancer/external IPs on %s", dotted(keyArpIgnoreAll), v, len(lb4), ipvsmode.DummyName), "")
		return
	}
	c.add(check, Warn, fmt.Sprintf("%s bound on %s and %s = %s: the node answers ARP for them on every link, competing with the load balancer that announces them",
		listSome(lb4, 3), ipvsmode.DummyName, dotted(keyArpIgnoreAll), v),
		"set ipvs.strictARP: true (--ipvs-strict-arp): kipvs then sets arp_ignore=1 and arp_announce=2")
}

// bridgeCNI returns the bridges that have veth ports (a bridge CNI's pods).
func (c *checkup) bridgeCNI() map[string][]*Link {
	bridges := map[string]bool{}
	for _, l := range c.links {
		if l.Kind == "bridge" {
			bridges[l.Name] = true
		}
	}
	out := map[string][]*Link{}
	for i := range c.links {
		l := &c.links[i]
		if l.Kind == "veth" && bridges[l.Master] {
			out[l.Master] = append(out[l.Master], l)
		}
	}
	return out
}

// checkBridgeNetfilter: with a bridge CNI, bridged traffic must go through iptables.
func (c *checkup) checkBridgeNetfilter() {
	br := c.bridgeCNI()
	if len(br) == 0 {
		return
	}
	names := sortedKeys(br)
	keys := []string{keyBridgeIptables}
	if c.hasFamily(inet.IPv6) {
		keys = append(keys, keyBridgeIp6)
	}
	for _, key := range keys {
		name := dotted(key)
		check := "sysctl " + name
		why := fmt.Sprintf("pods on bridge %s reach Services, and replies between pods on the same bridge must be seen by conntrack and IPVS", strings.Join(names, ", "))
		v, missing, err := c.get(key)
		switch {
		case err != nil:
			c.add(check, Warn, fmt.Sprintf("cannot read %s: %v", name, err), "")
		case missing:
			c.add(check, Fail, fmt.Sprintf("%s does not exist (br_netfilter not loaded); %s", name, why), "modprobe br_netfilter && sysctl -w "+name+"=1")
		case v != "1":
			c.add(check, Fail, fmt.Sprintf("%s = %s: %s", name, v, why), "sysctl -w "+name+"=1")
		default:
			c.add(check, OK, fmt.Sprintf("%s = 1 (bridge %s)", name, strings.Join(names, ", ")), "")
		}
	}
}
