package ipvsmode

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Sysctl keys (slash form) kipvs sets and doctor checks.
const (
	SysctlVSConntrack    = "net/ipv4/vs/conntrack"
	SysctlConnReuseMode  = "net/ipv4/vs/conn_reuse_mode"
	SysctlIPForward      = "net/ipv4/ip_forward"
	SysctlArpIgnoreAll   = "net/ipv4/conf/all/arp_ignore"
	sysctlArpAnnounceAll = "net/ipv4/conf/all/arp_announce"
	SysctlConntrackMax   = "net/netfilter/nf_conntrack_max"
)

// KernelVersion is a kernel release as major.minor.
type KernelVersion struct{ Major, Minor int }

func (v KernelVersion) less(major, minor int) bool {
	return v.Major < major || (v.Major == major && v.Minor < minor)
}

func (v KernelVersion) String() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// ParseKernelVersion reads "6.1.0-56-amd64" as 6.1.
func ParseKernelVersion(release string) (KernelVersion, error) {
	parts := strings.SplitN(release, ".", 3)
	if len(parts) < 2 {
		return KernelVersion{}, fmt.Errorf("kernel release %q: not major.minor", release)
	}
	major, err1 := strconv.Atoi(parts[0])
	minorStr := parts[1]
	if i := strings.IndexFunc(minorStr, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		minorStr = minorStr[:i]
	}
	minor, err2 := strconv.Atoi(minorStr)
	if err1 != nil || err2 != nil {
		return KernelVersion{}, fmt.Errorf("kernel release %q: not major.minor", release)
	}
	return KernelVersion{major, minor}, nil
}

// Sysctl is one kernel parameter kipvs sets: Key in slash form, the Value it writes, and
// Why kipvs needs it.
type Sysctl struct{ Key, Value, Why string }

// SysctlOptions are the settings of the configuration the sysctls depend on (config.Config's
// SysctlOptions fills them in).
type SysctlOptions struct {
	// StrictARP is ipvs.strictARP.
	StrictARP bool
	// ConntrackMax is the nf_conntrack_max to set; 0 leaves it alone.
	ConntrackMax int
	// The conntrack timeouts (whole seconds are written); 0 leaves the kernel's.
	TCPEstablishedTimeout, TCPCloseWaitTimeout time.Duration
	// TCPBeLiberal sets nf_conntrack_tcp_be_liberal.
	TCPBeLiberal bool
	// The conntrack UDP timeouts; 0 leaves the kernel's.
	UDPTimeout, UDPStreamTimeout time.Duration
}

// DesiredSysctls is what IPVS mode needs on kernel kv, as upstream kube-proxy sets it, plus
// the conntrack settings of o: the rule kipvs run follows and kipvs doctor checks. Warnings
// are for things to log but not set.
func DesiredSysctls(kv KernelVersion, o SysctlOptions) ([]Sysctl, []string) {
	var out []Sysctl
	var warn []string
	add := func(k, v, why string) { out = append(out, Sysctl{k, v, why}) }
	add(SysctlVSConntrack, "1", "IPVS must create conntrack entries for its NAT connections so iptables SNAT applies")
	switch {
	case kv.less(4, 1):
		warn = append(warn, fmt.Sprintf("kernel %s is older than 4.1: net/ipv4/vs/conn_reuse_mode cannot be tuned; expect stalls when ports are reused", kv))
	case kv.less(5, 9):
		add(SysctlConnReuseMode, "0", "kernels before 5.9 stall 1 s on port reuse with mode 1")
	default:
		// 5.9 fixed both the 1 s SYN delay and the rolling-update "no route to host"
		// (kernel commit 35dfb013149f), so the kernel's own setting is right.
	}
	add("net/ipv4/vs/expire_nodest_conn", "1", "drop connections to deleted real servers at once")
	add("net/ipv4/vs/expire_quiescent_template", "1", "expire persistence templates of weight-0 real servers")
	add(SysctlIPForward, "1", "the node forwards service traffic to pods")
	if o.StrictARP {
		add(SysctlArpIgnoreAll, "1", "strictARP: answer ARP only for addresses on the receiving link")
		add(sysctlArpAnnounceAll, "2", "strictARP: use the best local source address in ARP")
	}
	if m := o.ConntrackMax; m > 0 {
		add(SysctlConntrackMax, strconv.Itoa(m), "conntrack.maxPerCore x CPUs, at least conntrack.min")
	}
	secs := func(d time.Duration) string { return strconv.Itoa(int(d / time.Second)) }
	if d := o.TCPEstablishedTimeout; d > 0 {
		add("net/netfilter/nf_conntrack_tcp_timeout_established", secs(d), "conntrack.tcpEstablishedTimeout")
	}
	if d := o.TCPCloseWaitTimeout; d > 0 {
		add("net/netfilter/nf_conntrack_tcp_timeout_close_wait", secs(d), "conntrack.tcpCloseWaitTimeout")
	}
	if o.TCPBeLiberal {
		add("net/netfilter/nf_conntrack_tcp_be_liberal", "1", "conntrack.tcpBeLiberal")
	}
	if d := o.UDPTimeout; d > 0 {
		add("net/netfilter/nf_conntrack_udp_timeout", secs(d), "conntrack.udpTimeout")
	}
	if d := o.UDPStreamTimeout; d > 0 {
		add("net/netfilter/nf_conntrack_udp_timeout_stream", secs(d), "conntrack.udpStreamTimeout")
	}
	return out, warn
}
