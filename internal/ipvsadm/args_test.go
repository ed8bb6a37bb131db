package ipvsadm

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvs"
)

type fakeResolver struct{}

func (fakeResolver) LookupIPv4(host string) (netip.Addr, error) {
	if host == "vip.example" {
		return netip.MustParseAddr("10.0.0.7"), nil
	}
	return netip.Addr{}, errors.New("unknown host")
}

func (fakeResolver) LookupPort(protocol, service string) (int, error) {
	if service == "http" && protocol == "tcp" {
		return 80, nil
	}
	return 0, errors.New("unknown service")
}

func svcKey(p inet.Protocol, ap string) *ipvs.ServiceKey {
	a := netip.MustParseAddrPort(ap)
	return &ipvs.ServiceKey{Family: inet.FamilyOf(a.Addr()), Protocol: p, Addr: a.Addr(), Port: a.Port()}
}

func TestParse(t *testing.T) {
	base := Options{MetricsAddress: DefaultMetricsAddress}
	with := func(f func(o *Options)) Options {
		o := base
		f(&o)
		return o
	}
	tests := []struct {
		args string
		want Options
	}{
		{"", base},
		{"-L", base},
		{"-l", base},
		{"--list", base},
		{"-Ln", with(func(o *Options) { o.Numeric = true })},
		{"-nL", with(func(o *Options) { o.Numeric = true })},
		{"-L -n --stats --exact", with(func(o *Options) { o.Numeric, o.Stats, o.Exact = true, true, true })},
		{"-LnX --rate", with(func(o *Options) { o.Numeric, o.Rate, o.Exact = true, true, true })},
		{"-Ln --thresholds --persistent-conn --tun-info --nosort", with(func(o *Options) {
			o.Numeric, o.Thresholds, o.PersistentConn, o.TunInfo, o.NoSort = true, true, true, true, true
		})},
		{"-Ln --sort", with(func(o *Options) { o.Numeric = true })},
		{"-Sn", with(func(o *Options) { o.Command, o.Numeric = Save, true })},
		{"--save --numeric", with(func(o *Options) { o.Command, o.Numeric = Save, true })},
		{"-Lnc", with(func(o *Options) { o.Numeric, o.Connections = true, true })},
		{"-L --connection --persistent-conn", with(func(o *Options) { o.Connections, o.PersistentConn = true, true })},
		{"-L --timeout", with(func(o *Options) { o.Timeout = true })},
		{"-Ln -t 10.0.0.1:80", with(func(o *Options) { o.Numeric, o.Service = true, svcKey(inet.TCP, "10.0.0.1:80") })},
		{"-Lnt10.0.0.1:80", with(func(o *Options) { o.Numeric, o.Service = true, svcKey(inet.TCP, "10.0.0.1:80") })},
		{"-L --tcp-service=10.0.0.1:80", with(func(o *Options) { o.Service = svcKey(inet.TCP, "10.0.0.1:80") })},
		{"-L -u [fd00::1]:53", with(func(o *Options) { o.Service = svcKey(inet.UDP, "[fd00::1]:53") })},
		{"-L --udp-service fd00::1", with(func(o *Options) { o.Service = svcKey(inet.UDP, "[fd00::1]:0") })},
		{"-L --sctp-service 10.0.0.1:9", with(func(o *Options) { o.Service = svcKey(inet.SCTP, "10.0.0.1:9") })},
		{"-L -t 10.1:80", with(func(o *Options) { o.Service = svcKey(inet.TCP, "10.0.0.1:80") })},
		{"-L -t 0x0a000001", with(func(o *Options) { o.Service = svcKey(inet.TCP, "10.0.0.1:0") })},
		{"-L -t vip.example:http", with(func(o *Options) { o.Service = svcKey(inet.TCP, "10.0.0.7:80") })},
		{"-L -f 5", with(func(o *Options) { o.Service = &ipvs.ServiceKey{Family: inet.IPv4, FWMark: 5} })},
		{"-L -f 4294967295 -6", with(func(o *Options) { o.Service = &ipvs.ServiceKey{Family: inet.IPv6, FWMark: 4294967295} })},
		{"-Ln -o json", with(func(o *Options) { o.Numeric, o.Output = true, "json" })},
		{"-L --output=json --services --metrics-address 127.0.0.1:9999", with(func(o *Options) {
			o.Output, o.Owners, o.MetricsAddress = "json", true, "127.0.0.1:9999"
		})},
		{"-h", with(func(o *Options) { o.Help = true })},
	}
	for _, tc := range tests {
		t.Run(tc.args, func(t *testing.T) {
			got, err := Parse(strings.Fields(tc.args), fakeResolver{})
			if err != nil {
				t.Fatal(err)
			}
			if (got.Service == nil) != (tc.want.Service == nil) || got.Service != nil && *got.Service != *tc.want.Service {
				t.Errorf("Service = %v, want %v", got.Service, tc.want.Service)
			}
			got.Service, tc.want.Service = nil, nil
			if got != tc.want {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	// code is ipvsadm's exit status for the same command line: 255 where its option parser
	// rejects the option itself, 2 (0 here) where the options parse but conflict.
	tests := []struct {
		args, want string
		code       int
	}{
		{"-L -S", "multiple commands specified", 0},
		{"-Ln -n", "multiple 'numeric' options specified", 0},
		{"-L --stats --stats", "multiple 'stats' options specified", 0},
		{"-L -c -t 10.0.0.1:80", "The option 'service-address' conflicts with the 'connection' option in the 'list' command", 0},
		{"-L --timeout -c", "The option 'timeout' conflicts with the 'connection' option in the 'list' command", 0},
		{"-L -c --stats", "options conflicts in the list command", 0},
		{"-L --timeout --rate", "options conflicts in the list command", 0},
		{"-L --timeout --persistent-conn", "options conflicts in the list command", 0},
		{"-S --stats", "Illegal 'stats' option with the 'save' command", 0},
		{"-S -t 10.0.0.1:80", "Illegal 'service-address' option with the 'save' command", 0},
		{"-S -o json", "Illegal 'output' option with the 'save' command", 0},
		{"-L -t 10.0.0.1:80 -u 10.0.0.1:53", "multiple 'service-address' options specified", 0},
		{"-L -t 80", "illegal virtual server address[:port] specified", 0},
		{"-L -t nohost:80", "illegal virtual server address[:port] specified", 0},
		{"-L -t 10.0.0.1:70000", "illegal virtual server address[:port] specified", 0},
		{"-L -t 10.0.0.1:nosuch", "illegal virtual server address[:port] specified", 0},
		{"-L -t [fd00::1]", "illegal virtual server address[:port] specified", 0},
		{"-L -f 0", "invalid fwmark value `0' specified", 0},
		{"-L -f 4294967296", "invalid fwmark value `4294967296' specified", 0},
		{"-L -6", "-6 used before -f", 0},
		{"-L -t", "option -t needs a value", ExitBadOption},
		{"-A -t 10.0.0.1:80", "option -A changes IPVS", 0},
		{"-L --set 1 2 3", "option --set changes IPVS", 0},
		{"-L --daemon", "--daemon (the connection sync daemon) is not supported", 0},
		{"-L --bogus", "unknown option --bogus", ExitBadOption},
		{"-L -q", "unknown option -q", ExitBadOption},
		{"-L extra", "unexpected argument extra", 0},
		{"-L -o yaml", `--output "yaml"`, 0},
		{"-L --stats=1", "option --stats takes no value", ExitBadOption},
		{"-L -c --services", "--services annotates virtual servers", 0},
	}
	for _, tc := range tests {
		t.Run(tc.args, func(t *testing.T) {
			_, err := Parse(strings.Fields(tc.args), fakeResolver{})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !IsUsageError(err) {
				t.Fatalf("error %v, want a usage error containing %q", err, tc.want)
			}
			want := tc.code
			if want == 0 {
				want = ExitUsage
			}
			if code, ok := UsageExitCode(err); !ok || code != want {
				t.Errorf("exit code %d (usage error %v), want %d as ipvsadm", code, ok, want)
			}
		})
	}
}

func TestInetAton(t *testing.T) {
	tests := []struct{ in, want string }{
		{"10.0.0.1", "10.0.0.1"}, {"10.1", "10.0.0.1"}, {"10.1.2", "10.1.0.2"}, {"167772161", "10.0.0.1"},
		{"0x0a.0.0.010", "10.0.0.8"}, {"012.0.0.1", "10.0.0.1"}, {"1.2.3.256", ""}, {"1.2.3.4.5", ""},
		{"256.1", ""}, {"1.16777216", ""}, {"1.16777215", "1.255.255.255"}, {"09.1.1.1", ""}, {"", ""}, {"a.b", ""},
	}
	for _, tc := range tests {
		a, ok := inetAton(tc.in)
		got := ""
		if ok {
			got = a.String()
		}
		if got != tc.want {
			t.Errorf("inetAton(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
