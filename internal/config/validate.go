package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	netutils "k8s.io/utils/net"
)

// Validate checks every field of c and returns an errors.Join of one *FieldError per bad
// field (nil when c is valid). A clusterCIDR overlapping --kipvs-service-cidr is not
// refused (kube-proxy runs with it too): the daemon reports it and does not use it
// (CheckClusterCIDR).
func (c *Config) Validate() error {
	named := settingsByName()
	r := &findings{}
	for _, check := range []func(*findings, func(string) setting){
		c.validateAPI, c.validateNode, c.validateLocal, c.validateIPVS, c.validateConntrack, c.validateLogging,
	} {
		check(r, named)
	}
	return errors.Join(r.errs...)
}

// validateAPI checks the mode and the API connection.
func (c *Config) validateAPI(r *findings, named func(string) setting) {
	if c.Mode != ProxyModeIPVS {
		r.add(named("proxy-mode").invalid(c.Mode, "kipvs implements only the IPVS proxy mode; set it to %q or leave it empty", ProxyModeIPVS))
	}

	cc := c.ClientConnection
	if cc.ContentType != ContentTypeProtobuf && cc.ContentType != ContentTypeJSON {
		r.add(named("kube-api-content-type").invalid(cc.ContentType, "must be %s", quoteList([]string{ContentTypeProtobuf, ContentTypeJSON})))
	}
	if q := float64(cc.QPS); math.IsNaN(q) || math.IsInf(q, 0) {
		r.add(named("kube-api-qps").invalid(formatFloat(cc.QPS), "must be a finite number (a negative value disables client-side rate limiting)"))
	}
	switch {
	case cc.Burst < 0:
		r.add(named("kube-api-burst").invalid(strconv.Itoa(int(cc.Burst)), "must be greater than or equal to 0"))
	case cc.Burst == 0 && cc.QPS > 0:
		r.add(named("kube-api-burst").invalid("0", "must be greater than 0 when %s is greater than 0", named("kube-api-qps").field()))
	}
	r.add(positive(named("config-sync-period"), c.ConfigSyncPeriod))
}

// validateNode checks the node's name and addresses.
func (c *Config) validateNode(r *findings, named func(string) setting) {
	if c.HostnameOverride != "" {
		if msgs := validation.IsDNS1123Subdomain(c.HostnameOverride); len(msgs) > 0 {
			r.add(named("hostname-override").invalid(c.HostnameOverride, "must be a valid Node name: %s", strings.Join(msgs, "; ")))
		}
	}
	if !c.BindAddress.IsValid() {
		r.add(named("bind-address").invalid("", "must be an IP address"))
	}
	r.add(validateServerAddress(named("healthz-bind-address"), c.HealthzBindAddress))
	r.add(validateServerAddress(named("metrics-bind-address"), c.MetricsBindAddress))
}

// validateLocal checks local traffic detection, NodePort addresses and masquerading.
func (c *Config) validateLocal(r *findings, named func(string) setting) {
	r.add(validateDualStack(named("cluster-cidr"), c.ClusterCIDRs)...)
	switch c.DetectLocalMode {
	case LocalModeClusterCIDR, LocalModeNodeCIDR:
	case LocalModeBridgeInterface:
		r.add(validateInterfaceName(named("pod-bridge-interface"), c.BridgeInterface, c.DetectLocalMode))
	case LocalModeInterfaceNamePrefix:
		r.add(validateInterfaceName(named("pod-interface-name-prefix"), c.InterfaceNamePrefix, c.DetectLocalMode))
	default:
		modes := make([]string, 0, 4)
		for _, m := range LocalModes() {
			modes = append(modes, string(m))
		}
		r.add(named("detect-local-mode").invalid(string(c.DetectLocalMode), "must be one of %s", quoteList(modes)))
	}

	if c.NodePortPrimary && len(c.NodePortAddresses) > 0 {
		r.add(named("nodeport-addresses").invalid("primary,"+joinPrefixes(c.NodePortAddresses),
			"%q cannot be combined with CIDRs", nodePortPrimary))
	}
	r.add(validatePrefixes(named("nodeport-addresses"), c.NodePortAddresses)...)

	if c.MasqueradeBit < 0 || c.MasqueradeBit > 31 {
		r.add(named("iptables-masquerade-bit").invalid(strconv.Itoa(int(c.MasqueradeBit)), "must be within [0, 31]"))
	}
	if c.OOMScoreAdj < -1000 || c.OOMScoreAdj > 1000 {
		r.add(named("oom-score-adj").invalid(strconv.Itoa(int(c.OOMScoreAdj)), "must be within [-1000, 1000]"))
	}
}

func (c *Config) validateIPVS(r *findings, named func(string) setting) {
	v := c.IPVS
	r.add(positive(named("ipvs-sync-period"), v.SyncPeriod))
	r.add(nonNegative(named("ipvs-min-sync-period"), v.MinSyncPeriod))
	if v.MinSyncPeriod >= 0 && v.SyncPeriod > 0 && v.MinSyncPeriod > v.SyncPeriod {
		r.add(named("ipvs-min-sync-period").invalid(v.MinSyncPeriod.String(), "must not be greater than %s (%s)", named("ipvs-sync-period").field(), v.SyncPeriod))
	}
	// Any scheduler name, as kube-proxy: the daemon's start-up probe loads its kernel module
	// (ip_vs_<name>) and refuses to start, naming the module, when it cannot.
	r.add(validatePrefixes(named("ipvs-exclude-cidrs"), v.ExcludeCIDRs)...)
	r.add(nonNegative(named("ipvs-tcp-timeout"), v.TCPTimeout))
	r.add(nonNegative(named("ipvs-tcpfin-timeout"), v.TCPFinTimeout))
	r.add(nonNegative(named("ipvs-udp-timeout"), v.UDPTimeout))
}

func (c *Config) validateConntrack(r *findings, named func(string) setting) {
	ct := c.Conntrack
	if ct.MaxPerCore < 0 {
		r.add(named("conntrack-max-per-core").invalid(strconv.Itoa(int(ct.MaxPerCore)), "must be greater than or equal to 0 (0 leaves nf_conntrack_max alone)"))
	}
	if ct.Min < 0 {
		r.add(named("conntrack-min").invalid(strconv.Itoa(int(ct.Min)), "must be greater than or equal to 0"))
	}
	r.add(nonNegative(named("conntrack-tcp-timeout-established"), ct.TCPEstablishedTimeout))
	r.add(nonNegative(named("conntrack-tcp-timeout-close-wait"), ct.TCPCloseWaitTimeout))
	r.add(nonNegative(named("conntrack-udp-timeout"), ct.UDPTimeout))
	r.add(nonNegative(named("conntrack-udp-timeout-stream"), ct.UDPStreamTimeout))
}

// validateLogging checks the logging settings and kipvs's own.
func (c *Config) validateLogging(r *findings, named func(string) setting) {
	if c.LogFormat != LogFormatText && c.LogFormat != LogFormatJSON {
		r.add(named("logging-format").invalid(string(c.LogFormat), "must be %q or %q", LogFormatText, LogFormatJSON))
	}
	if c.Verbosity < 0 || c.Verbosity > math.MaxInt32 {
		r.add(named("v").invalid(strconv.Itoa(c.Verbosity), "must be between 0 and %d", math.MaxInt32))
	}

	r.add(validateDualStack(named("kipvs-service-cidr"), c.Kipvs.ServiceCIDRs)...)
	r.add(nonNegative(named("kipvs-graceful-period"), c.Kipvs.GracefulPeriod))
	if b := c.Kipvs.FilterBackend; b != FilterIPTables && b != FilterNFTables {
		r.add(named("kipvs-filter-backend").invalid(string(b), "must be %q or %q", FilterIPTables, FilterNFTables))
	}
	for s, v := range map[setting]int{named("kipvs-max-service-set-members"): c.Kipvs.MaxServiceSetMembers, named("kipvs-max-set-members"): c.Kipvs.MaxSetMembers,
		named("kipvs-max-service-virtual-servers"): c.Kipvs.MaxServiceVirtualServers, named("kipvs-max-service-real-servers"): c.Kipvs.MaxServiceRealServers,
		named("kipvs-max-real-servers"): c.Kipvs.MaxRealServers, named("kipvs-max-service-series"): c.Kipvs.MaxServiceSeries} {
		if v < 0 {
			r.add(s.invalid(strconv.Itoa(v), "must not be negative (0: no limit)"))
		}
	}
}

// CheckClusterCIDR finds a cluster (pod) CIDR that is, contains or lies inside one of the
// Service CIDRs (seed-001). kube-proxy accepts that mistake silently, and it leaves nodes
// unable to reach ClusterIPs. It returns nil or an errors.Join of one *FieldError per
// overlapping pair. The daemon applies it at every sync, with the Service CIDRs from the
// API or --kipvs-service-cidr, and leaves such a clusterCIDR out of local-traffic detection.
func CheckClusterCIDR(clusterCIDRs, serviceCIDRs []netip.Prefix) error {
	var errs []error
	for _, pod := range clusterCIDRs {
		for _, svc := range serviceCIDRs {
			if !pod.IsValid() || !svc.IsValid() || !pod.Overlaps(svc) {
				continue
			}
			how := "overlaps the Service CIDR " + svc.String()
			if pod.Masked() == svc.Masked() {
				how = "is the Service CIDR " + svc.String()
			}
			errs = append(errs, settingNamed("cluster-cidr").invalid(pod.String(),
				"%s. clusterCIDR must be the pod CIDR: the range pod IPs are allocated from, which "+
					"kipvs uses to tell traffic from pods apart from traffic from the node when it decides what "+
					"to masquerade. The Service CIDR is something else: the range ClusterIPs are allocated from "+
					"(kube-apiserver --service-cluster-ip-range). With a Service CIDR here, connections the node "+
					"itself makes to a ClusterIP look like pod traffic and are not masqueraded, so with kube-proxy the "+
					"node cannot reach Services (kipvs leaves such a clusterCIDR out of local-traffic detection). Set clusterCIDR (--cluster-cidr) to the pod CIDR (kube-controller-manager "+
					"--cluster-cidr or the CNI plugin's pod network), or leave it empty", how))
		}
	}
	return errors.Join(errs...)
}

func positive(s setting, d time.Duration) error {
	if d <= 0 {
		return s.invalid(d.String(), "must be greater than 0")
	}
	return nil
}

func nonNegative(s setting, d time.Duration) error {
	if d < 0 {
		return s.invalid(d.String(), "must be greater than or equal to 0 (0 leaves the current value)")
	}
	return nil
}

func validateServerAddress(s setting, ap netip.AddrPort) error {
	switch {
	case ap == netip.AddrPort{}:
		return nil // disabled
	case !ap.Addr().IsValid():
		return s.invalid(ap.String(), "must be IP:port")
	case ap.Port() == 0:
		return s.invalid(ap.String(), "the port must be between 1 and 65535")
	}
	return nil
}

// validatePrefixes checks that every prefix is a valid CIDR (prefixes built by hand may
// not be).
func validatePrefixes(s setting, ps []netip.Prefix) []error {
	var errs []error
	for _, p := range ps {
		if !p.IsValid() {
			errs = append(errs, s.invalid(p.String(), "must be a valid CIDR such as 10.0.0.0/8 or fd00::/48"))
		}
	}
	return errs
}

// validateDualStack checks a list that may hold at most one CIDR per IP family.
func validateDualStack(s setting, ps []netip.Prefix) []error {
	errs := validatePrefixes(s, ps)
	if len(errs) > 0 {
		return errs
	}
	var v4, v6 int
	for _, p := range ps {
		if p.Addr().Is4() {
			v4++
		} else {
			v6++
		}
	}
	if v4 > 1 || v6 > 1 {
		errs = append(errs, s.invalid(joinPrefixes(ps),
			"must be a single CIDR or a dual-stack pair (one IPv4 and one IPv6 CIDR), separated by a comma"))
	}
	return errs
}

// validateInterfaceName checks an interface name (or prefix) the way the kernel does.
func validateInterfaceName(s setting, name string, mode LocalMode) error {
	switch {
	case name == "":
		return s.invalid(name, "must be set when %s is %s", settingNamed("detect-local-mode").field(), mode)
	case len(name) > 15:
		return s.invalid(name, "an interface name has at most 15 characters")
	case name == "." || name == ".." || strings.ContainsAny(name, "/: \t\n"):
		return s.invalid(name, "is not a valid interface name (no '/', ':' or white space)")
	}
	return nil
}

// Parsing helpers shared by the file and the flags. They accept what kube-proxy accepts,
// including IPv4 addresses with leading zeros.

func parseIP(s string) (netip.Addr, bool) {
	ip := netutils.ParseIPSloppy(strings.TrimSpace(s))
	if ip == nil {
		return netip.Addr{}, false
	}
	a, ok := netip.AddrFromSlice(ip)
	return a.Unmap(), ok
}

func parseCIDR(s string) (netip.Prefix, error) {
	_, n, err := netutils.ParseCIDRSloppy(strings.TrimSpace(s))
	if err != nil {
		return netip.Prefix{}, err
	}
	ones, bits := n.Mask.Size()
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, fmt.Errorf("invalid CIDR address: %s", s)
	}
	if bits == 32 {
		a = a.Unmap()
	}
	return netip.PrefixFrom(a, ones).Masked(), nil
}

// parseCIDRs parses a list of CIDRs, one error per bad entry.
func parseCIDRs(s setting, items []string) ([]netip.Prefix, []error) {
	var out []netip.Prefix
	var errs []error
	for _, it := range items {
		if strings.TrimSpace(it) == "" {
			errs = append(errs, s.invalid(it, "empty entry in the CIDR list"))
			continue
		}
		p, err := parseCIDR(it)
		if err != nil {
			errs = append(errs, s.wrap(it, err, "must be a valid CIDR such as 10.0.0.0/8 or fd00::/48"))
			continue
		}
		out = append(out, p)
	}
	return out, errs
}

// splitCIDRList parses a comma-separated list ("" is the empty list).
func splitCIDRList(s setting, list string) ([]netip.Prefix, []error) {
	if strings.TrimSpace(list) == "" {
		return nil, nil
	}
	ps, errs := parseCIDRs(s, strings.Split(list, ","))
	if len(errs) > 0 {
		return nil, errs
	}
	return ps, nil
}

// parseHostPort parses "IP" (given defPort) or "IP:port".
func parseHostPort(s setting, v string, defPort uint16) (netip.AddrPort, error) {
	if a, ok := parseIP(v); ok {
		return netip.AddrPortFrom(a, defPort), nil
	}
	host, port, err := net.SplitHostPort(strings.TrimSpace(v))
	if err != nil {
		return netip.AddrPort{}, s.wrap(v, err, "must be IP or IP:port, such as 0.0.0.0:%d or [::]:%d", defPort, defPort)
	}
	a, ok := parseIP(host)
	if !ok {
		return netip.AddrPort{}, s.invalid(v, "%q is not an IP address (host names are not accepted)", host)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return netip.AddrPort{}, s.invalid(v, "the port must be between 1 and 65535")
	}
	return netip.AddrPortFrom(a, uint16(p)), nil
}

// normalizeHostname applies kube-proxy's rules to a Node name override: surrounding space
// is dropped and the name is lower-cased; a name of only white space is an error.
func normalizeHostname(s setting, v string) (string, error) {
	t := strings.ToLower(strings.TrimSpace(v))
	if t == "" && v != "" {
		return "", s.invalid(v, "must not be blank")
	}
	return t, nil
}

func joinPrefixes(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

func formatFloat(f float32) string { return strconv.FormatFloat(float64(f), 'g', -1, 32) }

const nodePortPrimary = "primary"
