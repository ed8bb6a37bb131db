package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/kipvs/kipvs/internal/config"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/sysctl"
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

// Sysctl is one kernel parameter Prepare sets: Key in slash form, the Value it writes, and
// Why kipvs needs it.
type Sysctl struct{ Key, Value, Why string }

// DesiredSysctls returns the sysctls Prepare sets on a kernel release with numCPU CPUs (the
// rule kipvs run follows, for kipvs doctor), and the warnings it logs instead of setting.
func DesiredSysctls(cfg *config.Config, release string, numCPU int) ([]Sysctl, []string, error) {
	kv, err := ParseKernelVersion(release)
	if err != nil {
		return nil, nil, err
	}
	settings, warnings := desiredSysctls(cfg, kv, numCPU)
	out := make([]Sysctl, len(settings))
	for i, s := range settings {
		out[i] = Sysctl{Key: s.key, Value: s.value, Why: s.why}
	}
	return out, warnings, nil
}

// sysctlSetting is one value kipvs wants.
type sysctlSetting struct {
	key, value, why string
}

// desiredSysctls is what IPVS mode needs on this kernel, as upstream kube-proxy sets it,
// plus the conntrack settings from the configuration. Warnings are returned for things to
// log but not set.
func desiredSysctls(cfg *config.Config, kv KernelVersion, numCPU int) ([]sysctlSetting, []string) {
	var out []sysctlSetting
	var warn []string
	add := func(k, v, why string) { out = append(out, sysctlSetting{k, v, why}) }
	add("net/ipv4/vs/conntrack", "1", "IPVS must create conntrack entries for its NAT connections so iptables SNAT applies")
	switch {
	case kv.less(4, 1):
		warn = append(warn, fmt.Sprintf("kernel %s is older than 4.1: net/ipv4/vs/conn_reuse_mode cannot be tuned; expect stalls when ports are reused", kv))
	case kv.less(5, 9):
		add("net/ipv4/vs/conn_reuse_mode", "0", "kernels before 5.9 stall 1 s on port reuse with mode 1")
	default:
		// 5.9 fixed both the 1 s SYN delay and the rolling-update "no route to host"
		// (kernel commit 35dfb013149f), so the kernel's own setting is right.
	}
	add("net/ipv4/vs/expire_nodest_conn", "1", "drop connections to deleted real servers at once")
	add("net/ipv4/vs/expire_quiescent_template", "1", "expire persistence templates of weight-0 real servers")
	add("net/ipv4/ip_forward", "1", "the node forwards service traffic to pods")
	if cfg.IPVS.StrictARP {
		add("net/ipv4/conf/all/arp_ignore", "1", "strictARP: answer ARP only for addresses on the receiving link")
		add("net/ipv4/conf/all/arp_announce", "2", "strictARP: use the best local source address in ARP")
	}
	if m := cfg.Conntrack.Max(numCPU); m > 0 {
		add("net/netfilter/nf_conntrack_max", strconv.Itoa(m), "conntrack.maxPerCore x CPUs, at least conntrack.min")
	}
	secs := func(d time.Duration) string { return strconv.Itoa(int(d / time.Second)) }
	if d := cfg.Conntrack.TCPEstablishedTimeout; d > 0 {
		add("net/netfilter/nf_conntrack_tcp_timeout_established", secs(d), "conntrack.tcpEstablishedTimeout")
	}
	if d := cfg.Conntrack.TCPCloseWaitTimeout; d > 0 {
		add("net/netfilter/nf_conntrack_tcp_timeout_close_wait", secs(d), "conntrack.tcpCloseWaitTimeout")
	}
	if cfg.Conntrack.TCPBeLiberal {
		add("net/netfilter/nf_conntrack_tcp_be_liberal", "1", "conntrack.tcpBeLiberal")
	}
	if d := cfg.Conntrack.UDPTimeout; d > 0 {
		add("net/netfilter/nf_conntrack_udp_timeout", secs(d), "conntrack.udpTimeout")
	}
	if d := cfg.Conntrack.UDPStreamTimeout; d > 0 {
		add("net/netfilter/nf_conntrack_udp_timeout_stream", secs(d), "conntrack.udpStreamTimeout")
	}
	return out, warn
}

// applySysctls sets every desired value, logging each change old -> new. A read-only
// /proc/sys fails with one error naming the key.
func applySysctls(s sysctl.Interface, settings []sysctlSetting, log *zap.Logger) error {
	for _, st := range settings {
		old, changed, err := s.Set(st.key, st.value)
		if err != nil {
			return fmt.Errorf("sysctl %s=%s (%s): %w", strings.ReplaceAll(st.key, "/", "."), st.value, st.why, err)
		}
		if changed {
			log.Info("set sysctl", zap.String("key", st.key), zap.String("old", old), zap.String("new", st.value), zap.String("why", st.why))
		}
	}
	return nil
}

// setConntrackHashsize raises nf_conntrack's hash table to max/4 buckets (as kube-proxy
// does) when it is smaller; sysfsRoot is normally /sys.
func setConntrackHashsize(sysfsRoot string, max int, log *zap.Logger) error {
	if max <= 0 {
		return nil
	}
	path := filepath.Join(sysfsRoot, "module/nf_conntrack/parameters/hashsize")
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil // nf_conntrack not loaded yet: the kernel sizes it from nf_conntrack_max
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	cur, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("read %s: %q is not a number", path, b)
	}
	want := max / 4
	if cur >= want {
		return nil
	}
	if err := os.WriteFile(path, []byte(strconv.Itoa(want)), 0o644); err != nil {
		return fmt.Errorf("set %s to %d: %w", path, want, err)
	}
	log.Info("set conntrack hashsize", zap.Int("old", cur), zap.Int("new", want))
	return nil
}

// ipvsTimeouts converts the configured IPVS timeouts (0 = leave the kernel's).
func ipvsTimeouts(cfg *config.Config) ipvs.Timeouts {
	return ipvs.Timeouts{
		TCP:    uint32(cfg.IPVS.TCPTimeout / time.Second),
		TCPFin: uint32(cfg.IPVS.TCPFinTimeout / time.Second),
		UDP:    uint32(cfg.IPVS.UDPTimeout / time.Second),
	}
}
