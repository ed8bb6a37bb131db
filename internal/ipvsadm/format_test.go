package ipvsadm

import (
	"bufio"
	"bytes"
	"net/netip"
	"strings"
	"testing"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvs"
)

// print_largenum's ranges and --exact widths, at every boundary.
func TestLargeNum(t *testing.T) {
	tests := []struct {
		v            uint64
		plain, exact string
	}{
		{0, "        0", "        0"},
		{99999999, " 99999999", " 99999999"},
		{100000000, "  100000K", " 100000000"},
		{999999999, "  999999K", " 999999999"},
		{1000000000, "    1000M", " 1000000000"},
		{99999999999, "   99999M", " 99999999999"},
		{100000000000, "     100G", " 100000000000"},
		{99999999999999, "   99999G", " 99999999999999"},
		{100000000000000, "     100T", " 100000000000000"},
		{18446744073709551615, "18446744T", " 18446744073709551615"},
	}
	for _, tc := range tests {
		for _, exact := range []bool{false, true} {
			var b bytes.Buffer
			w := bufio.NewWriter(&b)
			largeNum(w, tc.v, exact)
			_ = w.Flush()
			want := tc.plain
			if exact {
				want = tc.exact
			}
			if b.String() != want {
				t.Errorf("largeNum(%d, exact=%t) = %q, want %q", tc.v, exact, b.String(), want)
			}
		}
	}
}

func TestInetNtop6(t *testing.T) {
	for in, want := range map[string]string{
		"::": "::", "::1": "::1", "::1.2.3.4": "::1.2.3.4", "::ffff:1.2.3.4": "::ffff:1.2.3.4",
		"::ffff:0:1.2.3.4": "::ffff:0:102:304", "fd00::1": "fd00::1", "fd00:0:0:1::": "fd00:0:0:1::",
		"2001:db8:0:0:1:0:0:1": "2001:db8::1:0:0:1", "2001:db8:0:1:1:1:1:1": "2001:db8:0:1:1:1:1:1",
		"1:0:0:2:0:0:0:3": "1:0:0:2::3", "::2:3:4:5:6:7": "::2:3:4:5:6:7", "0:0:0:0:0:1:0:0": "::1:0:0",
	} {
		if got := inetNtop6(netip.MustParseAddr(in).As16()); got != want {
			t.Errorf("inetNtop6(%s) = %q, want %q", in, got, want)
		}
	}
}

func render(t *testing.T, args string, s Snapshot, owners Owners) string {
	t.Helper()
	o, err := Parse(strings.Fields(args), nil)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteList(&b, o, s, owners); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// Counters beyond what traffic in a test VM can reach: a service's full 64-bit values, a
// destination's counters truncated to 32 bits as libipvs 1.31 reads them (except bytes).
func TestStatsRanges(t *testing.T) {
	k := ipvs.ServiceKey{Family: inet.IPv4, Protocol: inet.TCP, Addr: netip.MustParseAddr("10.0.0.1"), Port: 80}
	big := ipvs.Stats{Conns: 1<<32 + 5, InPkts: 123456789012, OutPkts: 99999999, InBytes: 1<<40 + 1, OutBytes: 1e15,
		CPS: 1<<32 + 7, InPPS: 150000000, OutPPS: 3, InBPS: 1 << 33, OutBPS: 5e11}
	s := Snapshot{Info: ipvs.Info{Version: 0x010201, ConnTableSize: 4096}, Entries: []ipvs.Entry{{
		Service:      ipvs.Service{ServiceKey: k, Scheduler: "rr", Netmask: 0xffffffff, Stats: &big},
		Destinations: []ipvs.Destination{{Addr: netip.MustParseAddr("10.1.0.1"), Port: 8080, Weight: 1, Stats: &big}},
	}}}
	tests := []struct{ args, want string }{
		{"-Ln --stats", `IP Virtual Server version 1.2.1 (size=4096)
Prot LocalAddress:Port               Conns   InPkts  OutPkts  InBytes OutBytes
  -> RemoteAddress:Port
TCP  10.0.0.1:80                     4294M     123G 99999999    1099G    1000T
  -> 10.1.0.1:8080                       5    3197M 99999999    1099G    1000T
`},
		{"-Ln --stats --exact", `IP Virtual Server version 1.2.1 (size=4096)
Prot LocalAddress:Port               Conns   InPkts  OutPkts  InBytes OutBytes
  -> RemoteAddress:Port
TCP  10.0.0.1:80                  4294967301 123456789012 99999999 1099511627777 1000000000000000
  -> 10.1.0.1:8080                       5 3197704724 99999999 1099511627777 1000000000000000
`},
		{"-Ln --rate", `IP Virtual Server version 1.2.1 (size=4096)
Prot LocalAddress:Port                 CPS    InPPS   OutPPS    InBPS   OutBPS
  -> RemoteAddress:Port
TCP  10.0.0.1:80                     4294M  150000K        3    8589M     500G
  -> 10.1.0.1:8080                       7 150000000        3        0    1783M
`},
	}
	for _, tc := range tests {
		if got := render(t, tc.args, s, nil); got != tc.want {
			t.Errorf("%s:\n%s\nwant:\n%s", tc.args, got, tc.want)
		}
	}
}

// Owners (--services) annotate service lines and nothing else.
func TestOwnersAnnotation(t *testing.T) {
	k := ipvs.ServiceKey{Family: inet.IPv4, Protocol: inet.TCP, Addr: netip.MustParseAddr("10.96.0.1"), Port: 443}
	s := Snapshot{Info: ipvs.Info{Version: 0x010201, ConnTableSize: 4096}, Entries: []ipvs.Entry{
		{Service: ipvs.Service{ServiceKey: k, Scheduler: "rr", Netmask: 0xffffffff},
			Destinations: []ipvs.Destination{{Addr: netip.MustParseAddr("192.168.0.10"), Port: 6443, Weight: 1}}},
		{Service: ipvs.Service{ServiceKey: ipvs.ServiceKey{Family: inet.IPv4, Protocol: inet.UDP, Addr: netip.MustParseAddr("10.96.0.10"), Port: 53},
			Scheduler: "rr", Netmask: 0xffffffff}},
	}}
	owners := Owners{k: {{Namespace: "default", Name: "kubernetes", Port: "https"}, {Namespace: "x", Name: "y"}}}
	want := `IP Virtual Server version 1.2.1 (size=4096)
Prot LocalAddress:Port Scheduler Flags
  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn
TCP  10.96.0.1:443 rr  # default/kubernetes:https, x/y
  -> 192.168.0.10:6443            Masq    1      0          0         
UDP  10.96.0.10:53 rr
`
	if got := render(t, "-Ln --services", s, owners); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	js := tableJSON(Options{}, s, owners)
	if len(js.Services[0].Owners) != 2 || js.Services[1].Owners != nil {
		t.Errorf("JSON owners: %+v / %+v", js.Services[0].Owners, js.Services[1].Owners)
	}
}
