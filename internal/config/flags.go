package config

import (
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	"go.uber.org/zap"
	netutils "k8s.io/utils/net"
)

// Flags is the set of command-line flags AddFlags registered. Load reads them after the
// flag set has been parsed.
type Flags struct {
	fs    *pflag.FlagSet
	table []entry
	// appliers holds, for each entry of table, what applies its flag (nil: nothing to do).
	appliers []func(*flagRun)
}

// AddFlags registers kube-proxy's command-line flags (same names, types and defaults as
// kube-proxy v1.34 on Linux) and kipvs's own --kipvs-* flags on fs, and returns them for
// Load. Like kube-proxy, fs then accepts "_" in place of "-" in flag names.
//
// As in kube-proxy, most flags are ignored when --config is given (see AppliesWithConfig).
func AddFlags(fs *pflag.FlagSet) *Flags {
	d := Defaults()
	f := &Flags{fs: fs, table: table()}
	fs.SetNormalizeFunc(wordSepNormalize)
	f.appliers = make([]func(*flagRun), len(f.table))
	for i := range f.table {
		if e := &f.table[i]; e.register != nil {
			f.appliers[i] = e.register(fs, e, &d)
		}
	}
	return f
}

// value is the text of a flag's value.
func (f *Flags) value(name string) string { return f.fs.Lookup(name).Value.String() }

// configFile is the --config path ("" when none).
func (f *Flags) configFile() string { return f.value("config") }

// AppliesWithConfig reports whether kube-proxy v1.34 still applies the flag name (without
// dashes) when a --config file is given: the invocation flags (--config, --write-config-to,
// --cleanup, --init-only), --hostname-override, --master and the logging flags (-v,
// --vmodule, --logging-format, --log-*), which kube-proxy copies over the file's settings.
// It ignores every other flag then. kipvs also applies its own --kipvs-* flags, which have
// no field in the file, and --proxy-mode=ipvs (see apply).
func AppliesWithConfig(name string) bool {
	for _, e := range table() {
		if e.flag == name {
			return e.withConfig
		}
	}
	return strings.HasPrefix(name, "kipvs-")
}

// ignoredFlag is a flag given on the command line that does not apply because of --config.
type ignoredFlag struct {
	flag  string
	field string // the file field that holds the setting instead ("" when none)
}

// flagRun is one application of the flags to a Config.
type flagRun struct {
	f *Flags
	c *Config
	findings
}

// set reports whether the flag name was given on the command line and applies.
func (r *flagRun) set(name string) bool { return r.f.fs.Changed(name) && r.f.applies(name) }

// applies reports whether the flag name applies when given: all of them without --config;
// with it, those AppliesWithConfig names, plus --proxy-mode when it says ipvs (kipvs
// implements only IPVS mode, and --proxy-mode=ipvs is how it is told to read a file
// kube-proxy runs in another mode; kube-proxy itself ignores the flag). As in kube-proxy,
// --healthz-port and --metrics-port are also ignored with --write-config-to.
func (f *Flags) applies(name string) bool {
	e := f.entry(name)
	switch {
	case e == nil:
		return false
	case f.configFile() == "":
		return !e.portFlag || f.value("write-config-to") == ""
	case name == "proxy-mode":
		mode := f.value("proxy-mode")
		return mode == "" || mode == ProxyModeIPVS
	}
	return e.withConfig
}

// entry is the table's entry of the flag name (nil when none).
func (f *Flags) entry(name string) *entry {
	for i := range f.table {
		if f.table[i].flag == name {
			return &f.table[i]
		}
	}
	return nil
}

// apply copies the flags set explicitly on the command line that apply (see applies) into
// c, in table order. It returns one error per bad flag value, the notices for applied flags
// kipvs does not act on, and the flags given that do not apply.
func (f *Flags) apply(c *Config) ([]error, []notice, []ignoredFlag) {
	r := &flagRun{f: f, c: c}
	for i, e := range f.table {
		if f.appliers[i] != nil {
			f.appliers[i](r)
		}
		if e.flag != "" && e.flagNotice() != "" && r.set(e.flag) {
			r.notices = append(r.notices, notice{"--" + e.flag, e.flagNotice()})
		}
	}
	if f.configFile() != "" {
		// kube-proxy's flag parser checks these before it looks at --config.
		for _, e := range f.table {
			if e.ignoredSyntax != nil && f.fs.Changed(e.flag) && !f.applies(e.flag) {
				r.add(e.ignoredSyntax(e.setting(), f.value(e.flag)))
			}
		}
	}
	var ignored []ignoredFlag
	f.fs.Visit(func(fl *pflag.Flag) {
		if e := f.entry(fl.Name); e != nil && !f.applies(fl.Name) {
			ignored = append(ignored, ignoredFlag{flag: "--" + fl.Name, field: e.field})
		}
	})
	return r.errs, r.notices, ignored
}

// checkAddressSyntax checks an address flag the way kube-proxy's flag parser does: empty,
// an IP, or (with ipPort) an ip:port with a port number from 0 to 65535.
func checkAddressSyntax(s setting, v string, ipPort bool) error {
	if v == "" || netutils.ParseIPSloppy(v) != nil {
		return nil
	}
	if !ipPort {
		return s.invalid(v, "must be an IP address")
	}
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		return s.wrap(v, err, "must be an ip or ip:port")
	}
	if netutils.ParseIPSloppy(host) == nil {
		return s.invalid(v, "must be an ip or ip:port; %q is not an IP address", host)
	}
	if _, err := netutils.ParsePort(port, true); err != nil {
		return s.wrap(v, err, "must be an ip or ip:port; %q is not a port number", port)
	}
	return nil
}

// logIgnoredFlags logs, once each, the flags given on the command line that do not apply.
func logIgnoredFlags(log *zap.Logger, file string, ignored []ignoredFlag) {
	if log == nil {
		return
	}
	for _, i := range ignored {
		fields := []zap.Field{zap.String("flag", i.flag)}
		if i.field != "" {
			fields = append(fields, zap.String("field", i.field))
		}
		if file == "" {
			// Only --healthz-port and --metrics-port, with --write-config-to.
			log.Warn("flag ignored with --write-config-to, as kube-proxy ignores it", fields...)
			continue
		}
		fields = append(fields, zap.String("file", file))
		log.Warn("flag ignored because --config is given, as kube-proxy ignores it; set the field in the file instead", fields...)
	}
}

// applyServer applies --X-bind-address and the deprecated --X-port (each when it was set
// and applies) the way kube-proxy combines them: the port flag gives the port of a bare IP,
// and a port of 0 disables the server.
func applyServer(dst *netip.AddrPort, addrS, portS setting, defPort uint16, addrSet, portSet bool, addr string, port int32) error {
	if portSet && (port < 0 || port > 65535) {
		return portS.invalid(strconv.Itoa(int(port)), "must be between 0 and 65535 (0 disables the server)")
	}
	if portSet && port > 0 {
		defPort = uint16(port)
	}
	switch {
	case portSet && port == 0:
		*dst = netip.AddrPort{}
	case !addrSet:
	default:
		v, err := parseHostPort(addrS, addr, defPort)
		if err != nil {
			return err
		}
		*dst = v
	}
	return nil
}

// textValue is a string flag with a kube-proxy type name; its value is parsed by Load so
// that every bad value is reported together.
type textValue struct {
	p   *string
	typ string
}

func newTextValue(p *string, typ, def string) *textValue {
	*p = def
	return &textValue{p: p, typ: typ}
}

func (v *textValue) String() string     { return *v.p }
func (v *textValue) Set(s string) error { *v.p = s; return nil }
func (v *textValue) Type() string       { return v.typ }

// levelValue is the -v flag: a klog verbosity level.
type levelValue struct{ p *uint32 }

func (v *levelValue) String() string { return strconv.FormatUint(uint64(*v.p), 10) }
func (v *levelValue) Type() string   { return "Level" }
func (v *levelValue) Set(s string) error {
	n, err := strconv.ParseUint(s, 10, 31)
	if err != nil {
		return fmt.Errorf("verbosity must be a number between 0 and 2147483647: %w", err)
	}
	*v.p = uint32(n)
	return nil
}

// mapStringBool is the --feature-gates flag: name=bool pairs separated by commas; repeated
// flags add up.
type mapStringBool struct{ m *map[string]bool }

func (v *mapStringBool) Type() string { return "mapStringBool" }
func (v *mapStringBool) String() string {
	if *v.m == nil {
		return ""
	}
	keys := make([]string, 0, len(*v.m))
	for k := range *v.m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	pairs := make([]string, len(keys))
	for i, k := range keys {
		pairs[i] = fmt.Sprintf("%s=%t", k, (*v.m)[k])
	}
	return strings.Join(pairs, ",")
}
func (v *mapStringBool) Set(s string) error {
	if *v.m == nil {
		*v.m = map[string]bool{}
	}
	for _, pair := range strings.Split(s, ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		k, val, ok := strings.Cut(pair, "=")
		if !ok {
			return fmt.Errorf("%q is not name=true|false", pair)
		}
		b, err := strconv.ParseBool(strings.TrimSpace(val))
		if err != nil {
			return fmt.Errorf("%q is not name=true|false: %w", pair, err)
		}
		(*v.m)[strings.TrimSpace(k)] = b
	}
	return nil
}

// wordSepNormalize lets "_" stand for "-" in flag names, as kube-proxy does.
func wordSepNormalize(_ *pflag.FlagSet, name string) pflag.NormalizedName {
	return pflag.NormalizedName(strings.ReplaceAll(name, "_", "-"))
}
