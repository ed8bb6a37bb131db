package ipvsmode

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestDesiredSysctlsByKernel(t *testing.T) {
	var o SysctlOptions
	for _, tc := range []struct {
		release string
		reuse   string // "" = not set
		warn    bool
	}{
		{"3.10.0-1160.el7.x86_64", "", true},
		{"4.19.0-21-amd64", "0", false},
		{"5.8.18", "0", false},
		{"5.9.0", "", false},
		{"6.1.0-56-amd64", "", false},
	} {
		kv, err := ParseKernelVersion(tc.release)
		if err != nil {
			t.Fatal(err)
		}
		settings, warns := DesiredSysctls(kv, o)
		got := ""
		for _, s := range settings {
			if s.Key == "net/ipv4/vs/conn_reuse_mode" {
				got = s.Value
			}
		}
		if got != tc.reuse || (len(warns) > 0) != tc.warn {
			t.Errorf("%s: conn_reuse_mode=%q warnings=%v; want %q warn=%v", tc.release, got, warns, tc.reuse, tc.warn)
		}
	}
	o.StrictARP = true
	settings, _ := DesiredSysctls(KernelVersion{6, 1}, o)
	var keys []string
	for _, s := range settings {
		keys = append(keys, s.Key+"="+s.Value)
	}
	if !strings.Contains(strings.Join(keys, " "), "net/ipv4/conf/all/arp_ignore=1 net/ipv4/conf/all/arp_announce=2") {
		t.Errorf("strictARP settings missing: %v", keys)
	}
}

// Every option sets its sysctl, in a fixed order.
func TestDesiredSysctlsAllOptions(t *testing.T) {
	o := SysctlOptions{StrictARP: true, ConntrackMax: 131072, TCPEstablishedTimeout: 24 * time.Hour,
		TCPCloseWaitTimeout: time.Hour, TCPBeLiberal: true, UDPTimeout: 30 * time.Second, UDPStreamTimeout: 2 * time.Minute}
	settings, warns := DesiredSysctls(KernelVersion{5, 4}, o)
	var got strings.Builder
	for _, s := range settings {
		fmt.Fprintf(&got, "%s=%s\n", s.Key, s.Value)
	}
	want := `net/ipv4/vs/conntrack=1
net/ipv4/vs/conn_reuse_mode=0
net/ipv4/vs/expire_nodest_conn=1
net/ipv4/vs/expire_quiescent_template=1
net/ipv4/ip_forward=1
net/ipv4/conf/all/arp_ignore=1
net/ipv4/conf/all/arp_announce=2
net/netfilter/nf_conntrack_max=131072
net/netfilter/nf_conntrack_tcp_timeout_established=86400
net/netfilter/nf_conntrack_tcp_timeout_close_wait=3600
net/netfilter/nf_conntrack_tcp_be_liberal=1
net/netfilter/nf_conntrack_udp_timeout=30
net/netfilter/nf_conntrack_udp_timeout_stream=120
`
	if got.String() != want || len(warns) != 0 {
		t.Errorf("got warnings %v and\n%s\nwant\n%s", warns, got.String(), want)
	}
}
