package config

import (
	"fmt"
	"maps"
	"net/netip"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/kube-proxy/config/v1alpha1"
)

// The entries whose values are parsed, or that depend on one another, and their helpers.

type registerFunc = func(fs *pflag.FlagSet, e *entry, d *Config) func(*flagRun)

// parsedFlag registers a flag with reg, its default def(d), and applies its value with
// apply when it is given (values are parsed there, so that every bad value of the command
// line is reported together).
func parsedFlag[T any](reg flagVarFunc[T], def func(d *Config) T, apply func(r *flagRun, s setting, v T)) registerFunc {
	return func(fs *pflag.FlagSet, e *entry, d *Config) func(*flagRun) {
		p := new(T)
		reg(fs, p, e.flag, def(d), e.help)
		name, s := e.flag, e.setting()
		return func(r *flagRun) {
			if r.set(name) {
				apply(r, s, *p)
			}
		}
	}
}

// unusedFlag registers a flag whose value kipvs does not use.
func unusedFlag[T any](reg flagVarFunc[T], def T) registerFunc {
	return func(fs *pflag.FlagSet, e *entry, _ *Config) func(*flagRun) {
		reg(fs, new(T), e.flag, def, e.help)
		return nil
	}
}

func constant[T any](v T) func(*Config) T { return func(*Config) T { return v } }

// textVar registers a string flag shown in --help with a kube-proxy type name.
func textVar(typ string) flagVarFunc[string] {
	return func(fs *pflag.FlagSet, p *string, name, value, usage string) {
		fs.Var(newTextValue(p, typ, value), name, usage)
	}
}

func hostnameEntry() entry {
	return entry{field: "hostnameOverride", flag: "hostname-override", withConfig: true, sample: "worker-7",
		help: "Name of this node's Node object, when it is not the host name.",
		register: parsedFlag((*pflag.FlagSet).StringVar, constant(""), func(r *flagRun, s setting, v string) {
			if v != "" { // kube-proxy ignores an empty --hostname-override
				h, err := normalizeHostname(s, v)
				r.add(err)
				r.c.HostnameOverride = h
			}
		}),
		read: func(r *fileRun, s setting) {
			h, err := normalizeHostname(s, r.kp.HostnameOverride)
			r.add(err)
			r.c.HostnameOverride = h
		},
		write:  func(c *Config, k *kpConfig) { k.HostnameOverride = c.HostnameOverride },
		target: func(c *Config) []any { return []any{&c.HostnameOverride} },
	}
}

func bindAddressEntry() entry {
	return entry{field: "bindAddress", flag: "bind-address", sample: "192.168.1.10",
		help: "This node's IP address of its family, as in kube-proxy: the NodePort address with nodePortAddresses \"primary\", and the address a loadBalancerSourceRanges entry must contain to let the node itself reach the load balancer IP; 0.0.0.0 or :: means take it from the Node object. (No socket is bound to it; the name is historical.)",
		register: parsedFlag(textVar("ip"), func(d *Config) string { return addrString(d.BindAddress) }, func(r *flagRun, s setting, v string) {
			if v == "" { // kube-proxy ignores an empty --bind-address
				return
			}
			if ip, ok := parseIP(v); ok {
				r.c.BindAddress = ip
			} else {
				r.add(s.invalid(v, "must be an IP address"))
			}
		}),
		ignoredSyntax: func(s setting, v string) error { return checkAddressSyntax(s, v, false) },
		read: func(r *fileRun, s setting) {
			if v := r.kp.BindAddress; v != "" {
				if ip, ok := parseIP(v); ok {
					r.c.BindAddress = ip
				} else {
					r.add(s.invalid(v, "must be an IP address"))
				}
			}
		},
		write:  func(c *Config, k *kpConfig) { k.BindAddress = addrString(c.BindAddress) },
		target: func(c *Config) []any { return []any{&c.BindAddress} },
	}
}

// serverEntry completes the entry of a server's address flag and field (healthz or
// metrics). The flag is applied together with portFlag, the deprecated port flag, the way
// kube-proxy combines them (see applyServer). In a file the default address follows the
// family of bindAddress: v6 is the default when bindAddress is not IPv4.
func serverEntry(e entry, portFlag string, defPort uint16, v6 netip.AddrPort, get func(*Config) *netip.AddrPort, kp func(*kpConfig) *string) entry {
	e.register = func(fs *pflag.FlagSet, e *entry, d *Config) func(*flagRun) {
		p := new(string)
		textVar("ipport")(fs, p, e.flag, get(d).String(), e.help)
		name, s, portS := e.flag, e.setting(), setting(e.field+" --"+portFlag)
		return func(r *flagRun) {
			// kube-proxy's flag parser drops an empty address (its IPPortVar.Set("") changes
			// nothing), so the default stays, although its help says empty disables the server.
			addrSet := r.set(name)
			if addrSet && *p == "" {
				r.notices = append(r.notices, notice{"--" + name, "empty: kube-proxy keeps the default address for an empty value, and so does kipvs"})
				addrSet = false
			}
			port, err := r.f.fs.GetInt32(portFlag)
			if err != nil {
				r.add(fmt.Errorf("--%s: %w", portFlag, err))
				return
			}
			r.add(applyServer(get(r.c), s, portS, defPort, addrSet, r.set(portFlag), *p, port))
		}
	}
	e.ignoredSyntax = func(s setting, v string) error { return checkAddressSyntax(s, v, true) }
	e.read = func(r *fileRun, s setting) {
		if b := r.kp.BindAddress; b != "" {
			if ip, ok := parseIP(b); !ok || ip.Is6() {
				*get(r.c) = v6 // as kube-proxy: anything that is not IPv4 gets the IPv6 defaults
			}
		}
		if v := *kp(r.kp); v != "" {
			ap, err := parseHostPort(s, v, defPort)
			r.add(err)
			*get(r.c) = ap
		}
	}
	e.write = func(c *Config, k *kpConfig) { *kp(k) = addrPortString(*get(c)) }
	e.target = func(c *Config) []any { return []any{get(c)} }
	return e
}

// portEntry completes the entry of a deprecated port flag, which serverEntry applies.
func portEntry(e entry, def int32, deprecated string, get func(*Config) *netip.AddrPort) entry {
	e.portFlag = true
	e.register = func(fs *pflag.FlagSet, e *entry, _ *Config) func(*flagRun) {
		fs.Int32(e.flag, def, e.help)
		_ = fs.MarkDeprecated(e.flag, deprecated)
		return nil
	}
	e.target = func(c *Config) []any { return []any{get(c)} }
	return e
}

func modeEntry() entry {
	return entry{field: "mode", flag: "proxy-mode", sample: "ipvs",
		help: `Proxy mode. kipvs implements only "ipvs"; empty means ipvs, anything else is an error.`,
		register: parsedFlag(textVar("ProxyMode"), constant(""), func(r *flagRun, _ setting, v string) {
			r.c.Mode = v
			if v == "" {
				r.c.Mode = ProxyModeIPVS
			}
		}),
		read: func(r *fileRun, _ setting) {
			switch r.kp.Mode {
			case "":
				r.notices = append(r.notices, notice{"mode", "empty: kube-proxy would run in iptables mode with this file; " +
					"kipvs runs in IPVS mode and reads ipvs.syncPeriod and ipvs.minSyncPeriod"})
			case ProxyModeIPVS:
			default:
				r.c.Mode = string(r.kp.Mode) // refused by Validate, with the other errors
			}
		},
		write:  func(c *Config, k *kpConfig) { k.Mode = v1alpha1.ProxyMode(c.Mode) },
		target: func(c *Config) []any { return []any{&c.Mode} },
	}
}

func detectLocalModeEntry() entry {
	return fileField(entry{field: "detectLocalMode", flag: "detect-local-mode", sample: "NodeCIDR",
		help: "How to recognise traffic from pods on this node: ClusterCIDR (source in --cluster-cidr), NodeCIDR (source in the Node's podCIDRs), " +
			"BridgeInterface (arrives on --pod-bridge-interface) or InterfaceNamePrefix (arrives on an interface named --pod-interface-name-prefix*). Empty means ClusterCIDR.",
		register: parsedFlag(textVar("LocalMode"), constant(""), func(r *flagRun, _ setting, v string) {
			r.c.DetectLocalMode = LocalMode(v)
			if v == "" {
				r.c.DetectLocalMode = LocalModeClusterCIDR
			}
		})},
		func(c *Config) *LocalMode { return &c.DetectLocalMode }, func(k *kpConfig) *v1alpha1.LocalMode { return &k.DetectLocalMode },
		func(m v1alpha1.LocalMode) (LocalMode, bool) { return LocalMode(m), m != "" },
		func(m LocalMode) v1alpha1.LocalMode { return v1alpha1.LocalMode(m) })
}

func excludeCIDRsEntry() entry {
	return entry{field: "ipvs.excludeCIDRs", flag: "ipvs-exclude-cidrs", sample: "10.250.0.0/16,192.168.100.0/24",
		fileSample: "[10.250.0.0/16, 192.168.100.0/24]",
		help:       "Comma-separated CIDRs: IPVS virtual servers with an address inside them are never deleted by kipvs.",
		register: parsedFlag((*pflag.FlagSet).StringSliceVar, constant[[]string](nil), func(r *flagRun, s setting, v []string) {
			ps, errs := parseCIDRs(s, v)
			r.add(errs...)
			r.c.IPVS.ExcludeCIDRs = ps
		}),
		read: func(r *fileRun, s setting) {
			ps, errs := parseCIDRs(s, r.kp.IPVS.ExcludeCIDRs)
			r.add(errs...)
			r.c.IPVS.ExcludeCIDRs = ps
		},
		write:  func(c *Config, k *kpConfig) { k.IPVS.ExcludeCIDRs = prefixStrings(c.IPVS.ExcludeCIDRs) },
		target: func(c *Config) []any { return []any{&c.IPVS.ExcludeCIDRs} },
	}
}

func clusterCIDREntry() entry {
	return entry{field: "clusterCIDR", flag: "cluster-cidr", sample: "10.244.0.0/16,fd00:10:244::/56",
		help: "The pod CIDR (the range pod IPs come from), or one IPv4 and one IPv6 CIDR separated by a comma. " +
			"With --detect-local-mode=ClusterCIDR, traffic from this range counts as pod traffic when deciding what to masquerade. " +
			"Not the Service CIDR.",
		register: cidrListFlag(func(c *Config) *[]netip.Prefix { return &c.ClusterCIDRs }),
		read: func(r *fileRun, s setting) {
			ps, errs := splitCIDRList(s, r.kp.ClusterCIDR)
			r.add(errs...)
			r.c.ClusterCIDRs = ps
		},
		write:  func(c *Config, k *kpConfig) { k.ClusterCIDR = strings.Join(prefixStrings(c.ClusterCIDRs), ",") },
		target: func(c *Config) []any { return []any{&c.ClusterCIDRs} },
	}
}

// cidrListFlag is a string flag holding comma-separated CIDRs.
func cidrListFlag(get func(*Config) *[]netip.Prefix) registerFunc {
	return parsedFlag((*pflag.FlagSet).StringVar, constant(""), func(r *flagRun, s setting, v string) {
		ps, errs := splitCIDRList(s, v)
		r.add(errs...)
		*get(r.c) = ps
	})
}

func nodePortAddressesEntry() entry {
	return entry{field: "nodePortAddresses", flag: "nodeport-addresses", sample: "192.168.1.0/24,10.0.0.0/8",
		fileSample: "[192.168.1.0/24, 10.0.0.0/8]",
		help:       `Comma-separated CIDRs: NodePorts are served only on node IPs inside them. The single word "primary" serves them only on the node's IP of each family (--bind-address for its family, else the Node object's), and on every local IP of a family without one. Empty: every local IP.`,
		register: parsedFlag((*pflag.FlagSet).StringSliceVar, constant[[]string](nil), func(r *flagRun, s setting, v []string) {
			ps, primary, errs := parseNodePortAddresses(s, v)
			r.add(errs...)
			r.c.NodePortAddresses, r.c.NodePortPrimary = ps, primary
		}),
		read: func(r *fileRun, s setting) {
			ps, primary, errs := parseNodePortAddresses(s, r.kp.NodePortAddresses)
			r.add(errs...)
			r.c.NodePortAddresses, r.c.NodePortPrimary = ps, primary
		},
		write: func(c *Config, k *kpConfig) {
			k.NodePortAddresses = prefixStrings(c.NodePortAddresses)
			if c.NodePortPrimary {
				k.NodePortAddresses = append([]string{nodePortPrimary}, k.NodePortAddresses...)
			}
		},
		target: func(c *Config) []any { return []any{&c.NodePortAddresses, &c.NodePortPrimary} },
	}
}

// preferSameTrafficDistribution is the one feature gate of kube-proxy v1.34 that changes
// what kipvs programs.
const preferSameTrafficDistribution = "PreferSameTrafficDistribution"

// featureGatesEntry: kipvs acts on PreferSameTrafficDistribution only, and keeps the other
// gates so that the configuration renders back unchanged.
func featureGatesEntry() entry {
	return entry{field: "featureGates", flag: "feature-gates",
		reason: "kipvs acts on " + preferSameTrafficDistribution + " only; other gates are kept, not acted on",
		sample: "AllAlpha=false", fileSample: "{AllAlpha: false}",
		help: "Feature gates, as name=true|false pairs separated by commas. kipvs acts on " +
			preferSameTrafficDistribution + " (false: EndpointSlices' node hints are not followed) and keeps the others.",
		register: func(fs *pflag.FlagSet, e *entry, _ *Config) func(*flagRun) {
			m := new(map[string]bool)
			fs.Var(&mapStringBool{m}, e.flag, e.help)
			name := e.flag
			return func(r *flagRun) {
				if r.set(name) {
					r.c.FeatureGates = *m
				}
			}
		},
		read: func(r *fileRun, _ setting) {
			if len(r.kp.FeatureGates) > 0 {
				r.c.FeatureGates = maps.Clone(r.kp.FeatureGates)
			}
		},
		write: func(c *Config, k *kpConfig) {
			k.FeatureGates = maps.Clone(c.FeatureGates)
			if k.FeatureGates == nil {
				k.FeatureGates = map[string]bool{}
			}
		},
		unused: func(k *kpConfig) any {
			n := len(k.FeatureGates)
			if _, ok := k.FeatureGates[preferSameTrafficDistribution]; ok {
				n--
			}
			return n
		},
		target: func(c *Config) []any { return []any{&c.FeatureGates} },
	}
}
