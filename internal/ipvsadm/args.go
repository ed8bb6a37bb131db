package ipvsadm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvs"
)

// Command is what a status run does.
type Command int

// Commands.
const (
	// List is ipvsadm -L / -l (the default when no command is given).
	List Command = iota
	// Save is ipvsadm -S: the table as ipvsadm rules.
	Save
)

// Options are the parsed arguments of `kipvs status`: ipvsadm's listing options plus the
// kipvs extras Output and Owners.
type Options struct {
	Command Command
	// Numeric is -n. kipvs never resolves names, so it only records that it was given.
	Numeric bool
	// Connections is -c (the connection table, read from /proc/net/ip_vs_conn).
	Connections bool
	// Timeout is --timeout.
	Timeout bool
	// Format flags, as ipvsadm's FMT_*.
	Stats, Rate, Thresholds, PersistentConn, Exact, NoSort, TunInfo bool
	// Service is the -t / -u / --sctp-service / -f filter, nil for all services.
	Service *ipvs.ServiceKey

	// Output is "" (ipvsadm's text) or "json" (kipvs extra, -o/--output).
	Output string
	// Owners annotates each virtual server with the Services it came from (--services),
	// read from the running daemon at MetricsAddress.
	Owners         bool
	MetricsAddress string
	// Help is -h/--help.
	Help bool
}

// DefaultMetricsAddress is where --services asks the running daemon (kube-proxy's default
// metrics bind address).
const DefaultMetricsAddress = "127.0.0.1:10249"

// Exit codes of a bad command line, as ipvsadm's: its option parser (popt) rejects an
// unknown option, a missing value or a value given to a flag with "OPT: reason" and exit
// status 255 (it returns -1 from main); a command line that parses but makes no sense
// (conflicting options, a bad address, a stray argument) fails with status 2.
const (
	ExitBadOption = 255
	ExitUsage     = 2
)

// UsageError is a malformed or conflicting command line. Code is the exit status ipvsadm
// gives the same mistake (ExitBadOption or ExitUsage).
type UsageError struct {
	Msg  string
	Code int
}

func (e *UsageError) Error() string { return e.Msg }

// usagef is a command line that parses but is wrong (ipvsadm's fail(2, ...)).
func usagef(format string, args ...any) error {
	return &UsageError{Msg: fmt.Sprintf(format, args...), Code: ExitUsage}
}

// badOptionf is an option the parser itself rejects (popt's errors in ipvsadm).
func badOptionf(format string, args ...any) error {
	return &UsageError{Msg: fmt.Sprintf(format, args...), Code: ExitBadOption}
}

// IsUsageError reports whether err is a command-line error.
func IsUsageError(err error) bool {
	var u *UsageError
	return errors.As(err, &u)
}

// UsageExitCode is the exit status ipvsadm gives the command-line error in err, and false
// when err is not one.
func UsageExitCode(err error) (int, bool) {
	var u *UsageError
	if !errors.As(err, &u) {
		return 0, false
	}
	if u.Code == 0 {
		return ExitUsage, true
	}
	return u.Code, true
}

// option bits, named as ipvsadm names them in its messages.
type optBit int

const (
	optNumeric optBit = iota
	optConnection
	optService
	optTimeout
	optStats
	optRate
	optThresholds
	optPersistentConn
	optNoSort
	optExact
	optTunInfo
	optOutput
	optOwners
	optMetricsAddress
	numOpts
)

var optNames = [numOpts]string{
	"numeric", "connection", "service-address", "timeout", "stats", "rate", "thresholds",
	"persistent-conn", "nosort", "exact", "tun-info", "output", "services", "metrics-address",
}

// Options ipvsadm accepts but that change IPVS or the sync daemon: kipvs status refuses
// them by name.
var editOptions = map[string]bool{
	"A": true, "add-service": true, "E": true, "edit-service": true, "D": true, "delete-service": true,
	"C": true, "clear": true, "Z": true, "zero": true, "a": true, "add-server": true, "e": true,
	"edit-server": true, "d": true, "delete-server": true, "set": true, "R": true, "restore": true,
	"start-daemon": true, "stop-daemon": true, "s": true, "scheduler": true, "p": true,
	"persistent": true, "M": true, "netmask": true, "r": true, "real-server": true,
	"m": true, "masquerading": true, "i": true, "ipip": true, "g": true, "gatewaying": true,
	"w": true, "weight": true, "x": true, "u-threshold": true, "y": true, "l-threshold": true,
	"mcast-interface": true, "syncid": true, "ops": true, "pe": true, "b": true,
	"sched-flags": true, "mcast-group": true, "mcast-port": true, "mcast-ttl": true,
	"sync-maxlen": true, "tun-type": true, "tun-port": true, "tun-nocsum": true,
	"tun-csum": true, "tun-remcsum": true, "v": true, "version": true,
}

// longNames maps long options to their canonical short or long form.
var longNames = map[string]string{
	"list": "L", "save": "S", "numeric": "n", "connection": "c", "exact": "X", "ipv6": "6",
	"tcp-service": "t", "udp-service": "u", "fwmark-service": "f", "help": "h", "output": "o",
}

// takesArg lists the options that need a value.
var takesArg = map[string]bool{
	"t": true, "u": true, "sctp-service": true, "f": true, "o": true, "metrics-address": true,
}

// argParser is the state of one Parse: the options so far, which option bits were given,
// whether a command was, and the service filter still to resolve.
type argParser struct {
	o        Options
	set      [numOpts]bool
	haveCmd  bool
	fwmark   bool
	protocol inet.Protocol
	svcArg   string
}

// Parse parses ipvsadm-style arguments (short options may be bundled as in -Ln, values
// may follow as the next argument or be attached: -t10.0.0.1:80, --output=json). Unlike
// ipvsadm, the command (-L or -S) may come anywhere and defaults to -L. Host and port
// names in a service address are resolved with resolve (nil: numeric only).
func Parse(args []string, resolve Resolver) (Options, error) {
	p := &argParser{o: Options{MetricsAddress: DefaultMetricsAddress}}
	for i := 0; i < len(args); i++ {
		var err error
		a := args[i]
		switch {
		case a == "--":
			if i+1 < len(args) {
				return p.o, usagef("unexpected argument %s", args[i+1])
			}
		case strings.HasPrefix(a, "--"):
			i, err = p.long(args, i)
		case strings.HasPrefix(a, "-") && len(a) > 1:
			i, err = p.short(args, i)
		default:
			err = usagef("unexpected argument %s", a)
		}
		if err != nil {
			return p.o, err
		}
	}
	return p.finish(resolve)
}

// long handles the long option args[i] (--name or --name=value) and returns the index of
// the last argument it used.
func (p *argParser) long(args []string, i int) (int, error) {
	a := args[i]
	name, val, hasVal := strings.Cut(a[2:], "=")
	if c, ok := longNames[name]; ok {
		name = c
	}
	if takesArg[name] && !hasVal {
		if i+1 >= len(args) {
			return i, badOptionf("option %s needs a value", a)
		}
		i++
		val = args[i]
	} else if !takesArg[name] && hasVal {
		return i, badOptionf("option --%s takes no value", name)
	}
	return i, p.handle(name, val)
}

// short handles the bundle of short options args[i] (-Ln, -t10.0.0.1:80, -t followed by
// its value) and returns the index of the last argument it used.
func (p *argParser) short(args []string, i int) (int, error) {
	a := args[i]
	for j := 1; j < len(a); j++ {
		name := a[j : j+1]
		if !takesArg[name] {
			if err := p.handle(name, ""); err != nil {
				return i, err
			}
			continue
		}
		val := a[j+1:]
		if val == "" {
			if i+1 >= len(args) {
				return i, badOptionf("option -%s needs a value", name)
			}
			i++
			val = args[i]
		}
		return i, p.handle(name, val)
	}
	return i, nil
}

// finish resolves the service filter and checks the option combination, once every
// argument is handled.
func (p *argParser) finish(resolve Resolver) (Options, error) {
	if p.o.Help {
		return p.o, nil
	}
	if p.svcArg != "" || (p.protocol != 0 && p.o.Service == nil) {
		k, err := parseService(p.svcArg, p.protocol, resolve)
		if err != nil {
			return p.o, err
		}
		p.o.Service = &k
	}
	return p.o, check(p.o.Command, p.set)
}

func (p *argParser) setOpt(b optBit) error {
	if p.set[b] {
		return usagef("multiple '%s' options specified", optNames[b])
	}
	p.set[b] = true
	return nil
}

func (p *argParser) setCmd(c Command) error {
	if p.haveCmd {
		return usagef("multiple commands specified")
	}
	p.haveCmd, p.o.Command = true, c
	return nil
}

// handle applies one option, name in its canonical form (longNames), val its value when
// it takes one.
func (p *argParser) handle(name, val string) error {
	if field, b, ok := p.flag(name); ok {
		*field = true
		return p.setOpt(b)
	}
	switch name {
	case "L", "l":
		return p.setCmd(List)
	case "S":
		return p.setCmd(Save)
	case "h":
		p.o.Help = true
	case "daemon":
		return usagef("--daemon (the connection sync daemon) is not supported by kipvs status; use ipvsadm -L --daemon")
	case "sort": // the default; accepted for compatibility
	case "t", "u", "sctp-service", "f", "6":
		return p.service(name, val)
	case "o":
		return p.output(val)
	case "metrics-address":
		p.o.MetricsAddress = val
		return p.setOpt(optMetricsAddress)
	default:
		if editOptions[name] {
			return usagef("option %s changes IPVS: kipvs status only lists (use ipvsadm to edit)", optString(name))
		}
		return badOptionf("unknown option %s", optString(name))
	}
	return nil
}

// flag returns the Options field and the option bit of a flag that only switches
// something on, and false when name is not one.
func (p *argParser) flag(name string) (*bool, optBit, bool) {
	o := &p.o
	switch name {
	case "n":
		return &o.Numeric, optNumeric, true
	case "c":
		return &o.Connections, optConnection, true
	case "timeout":
		return &o.Timeout, optTimeout, true
	case "stats":
		return &o.Stats, optStats, true
	case "rate":
		return &o.Rate, optRate, true
	case "thresholds":
		return &o.Thresholds, optThresholds, true
	case "persistent-conn":
		return &o.PersistentConn, optPersistentConn, true
	case "nosort":
		return &o.NoSort, optNoSort, true
	case "X":
		return &o.Exact, optExact, true
	case "tun-info":
		return &o.TunInfo, optTunInfo, true
	case "services":
		return &o.Owners, optOwners, true
	}
	return nil, 0, false
}

// service handles the service filter options: -t, -u and --sctp-service (an address
// resolved in finish), -f (a firewall mark) and -6 (the mark's family).
func (p *argParser) service(name, val string) error {
	if name == "6" {
		if !p.fwmark {
			return usagef("-6 used before -f")
		}
		p.o.Service.Family = inet.IPv6
		return nil
	}
	if err := p.setOpt(optService); err != nil {
		return err
	}
	if name != "f" {
		p.protocol = map[string]inet.Protocol{"t": inet.TCP, "u": inet.UDP, "sctp-service": inet.SCTP}[name]
		p.svcArg = val
		return nil
	}
	m, err := parseFWMark(val)
	if err != nil {
		return err
	}
	p.fwmark = true
	p.o.Service = &ipvs.ServiceKey{Family: inet.IPv4, FWMark: m}
	return nil
}

// output handles -o/--output: "json", or "text" or "" for ipvsadm's text.
func (p *argParser) output(val string) error {
	if val != "json" && val != "text" && val != "" {
		return usagef("--output %q: must be \"json\" or \"text\"", val)
	}
	if val == "text" {
		val = ""
	}
	p.o.Output = val
	return p.setOpt(optOutput)
}

func optString(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// check applies ipvsadm's table of legal option combinations (commands_v_options) and
// its extra list-command conflicts, with ipvsadm's messages.
func check(cmd Command, set [numOpts]bool) error {
	if cmd == Save {
		for b := optBit(0); b < numOpts; b++ {
			if set[b] && b != optNumeric && b != optMetricsAddress {
				return usagef("Illegal '%s' option with the 'save' command", optNames[b])
			}
		}
		return nil
	}
	// Exclusive in ipvsadm: connection, service-address, timeout (daemon is refused above).
	last := optBit(-1)
	for _, b := range []optBit{optConnection, optService, optTimeout} {
		if !set[b] {
			continue
		}
		if last >= 0 {
			return usagef("The option '%s' conflicts with the '%s' option in the 'list' command", optNames[b], optNames[last])
		}
		last = b
	}
	if (set[optConnection] || set[optTimeout]) && (set[optStats] || set[optRate] || set[optThresholds]) ||
		set[optTimeout] && set[optPersistentConn] {
		return usagef("options conflicts in the list command")
	}
	if set[optOwners] && (set[optConnection] || set[optTimeout]) {
		return usagef("--services annotates virtual servers; it does not apply to -c or --timeout")
	}
	return nil
}

// parseFWMark is ipvsadm's parse_fwmark: a decimal number from 1 to 2^32-1.
func parseFWMark(s string) (uint32, error) {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v <= 0 || v > 1<<32-1 {
		return 0, usagef("invalid fwmark value `%s' specified", s)
	}
	return uint32(v), nil
}

// Resolver resolves a host name to an IPv4 address and a service name to a port, as
// ipvsadm's gethostbyname and getservbyname do for -t/-u/--sctp-service arguments.
type Resolver interface {
	LookupIPv4(host string) (netip.Addr, error)
	LookupPort(protocol, service string) (int, error)
}

// NetResolver resolves with the Go resolver (/etc/hosts, DNS, /etc/services).
type NetResolver struct{}

// LookupIPv4 returns the first IPv4 address of host.
func (NetResolver) LookupIPv4(host string) (netip.Addr, error) {
	addrs, err := net.DefaultResolver.LookupNetIP(context.Background(), "ip4", host)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("resolve host %q: %w", host, err)
	}
	if len(addrs) == 0 {
		return netip.Addr{}, fmt.Errorf("resolve host %q: no IPv4 address", host)
	}
	return addrs[0].Unmap(), nil
}

// LookupPort looks a service name up for protocol "tcp", "udp" or "sctp".
func (NetResolver) LookupPort(protocol, service string) (int, error) {
	p, err := net.LookupPort(protocol, service)
	if err != nil {
		return 0, fmt.Errorf("resolve port %q/%s: %w", service, protocol, err)
	}
	return p, nil
}

// parseService is ipvsadm's parse_service for a listing filter: "[v6addr]:port", "v6addr"
// (port 0), "v4addr[:port]" where v4addr is anything inet_aton accepts or a host name.
func parseService(arg string, proto inet.Protocol, resolve Resolver) (ipvs.ServiceKey, error) {
	bad := usagef("illegal virtual server address[:port] specified")
	if arg == "" || isAllDigits(arg) {
		return ipvs.ServiceKey{}, bad
	}
	buf, port, hasPort := arg, "", false
	if strings.HasPrefix(buf, "[") {
		end := strings.IndexByte(buf, ']')
		if end < 0 || end+1 >= len(buf) || buf[end+1] != ':' {
			return ipvs.ServiceKey{}, bad
		}
		buf, port, hasPort = buf[1:end], buf[end+2:], true
	}
	k := ipvs.ServiceKey{Protocol: proto}
	if a, err := netip.ParseAddr(buf); err == nil && a.Is6() && a.Zone() == "" {
		k.Addr, k.Family = a, inet.IPv6
	} else {
		if !hasPort {
			if i := strings.LastIndexByte(buf, ':'); i >= 0 {
				buf, port, hasPort = buf[:i], buf[i+1:], true
			}
		}
		if a, ok := inetAton(buf); ok {
			k.Addr = a
		} else if resolve != nil {
			a, err := resolve.LookupIPv4(buf)
			if err != nil {
				return ipvs.ServiceKey{}, bad
			}
			k.Addr = a
		} else {
			return ipvs.ServiceKey{}, bad
		}
		k.Family = inet.IPv4
	}
	if hasPort {
		if n, err := strconv.ParseInt(port, 10, 32); err == nil && port != "" && n >= 0 && n <= 65535 {
			k.Port = uint16(n)
		} else if resolve != nil {
			n, err := resolve.LookupPort(proto.String(), port)
			if err != nil || n < 0 || n > 65535 {
				return ipvs.ServiceKey{}, bad
			}
			k.Port = uint16(n)
		} else {
			return ipvs.ServiceKey{}, bad
		}
	}
	return k, nil
}

func isAllDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// inetAton parses an IPv4 address the way inet_aton(3) does: one to four parts, each
// decimal, octal (leading 0) or hex (leading 0x); the last part fills the remaining bytes.
func inetAton(s string) (netip.Addr, bool) {
	if s == "" {
		return netip.Addr{}, false
	}
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	vals := make([]uint64, len(parts))
	for i, p := range parts {
		base, digits := 10, p
		switch {
		case strings.HasPrefix(p, "0x") || strings.HasPrefix(p, "0X"):
			base, digits = 16, p[2:]
			if digits == "" {
				digits = "0" // glibc accepts a bare "0x" as zero
			}
		case len(p) > 1 && p[0] == '0':
			base, digits = 8, p[1:]
		}
		if digits == "" || strings.ContainsAny(digits[:1], "+-") {
			return netip.Addr{}, false
		}
		v, err := strconv.ParseUint(digits, base, 32)
		if err != nil {
			return netip.Addr{}, false
		}
		vals[i] = v
	}
	last := len(vals) - 1
	for i := 0; i < last; i++ {
		if vals[i] > 0xff {
			return netip.Addr{}, false
		}
	}
	if vals[last] > uint64(0xffffffff)>>(8*last) {
		return netip.Addr{}, false
	}
	var v uint32
	for i := 0; i < last; i++ {
		v |= uint32(vals[i]) << (24 - 8*i)
	}
	v |= uint32(vals[last])
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}
