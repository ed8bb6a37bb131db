package harness

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

func TestParseIPVS(t *testing.T) {
	out := `-A -t 10.96.0.1:443 -s rr
-A -t 10.96.1.10:80 -s rr
-a -t 10.96.1.10:80 -r 10.244.0.11:8080 -m -w 1
-a -t 10.96.1.10:80 -r 10.244.0.12:8080 -m -w 0
-A -u 10.96.1.10:80 -s rr
-a -u 10.96.1.10:80 -r 10.244.0.11:8080 -m -w 1
`
	got, err := parseIPVS(out)
	if err != nil {
		t.Fatal(err)
	}
	want := IPVSTable{
		"tcp 10.96.0.1:443": {},
		"tcp 10.96.1.10:80": {"10.244.0.11:8080": 1, "10.244.0.12:8080": 0},
		"udp 10.96.1.10:80": {"10.244.0.11:8080": 1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("parseIPVS = %v, want %v", got, want)
	}
	if ok, why := got.Matches("tcp 10.96.1.10:80", map[string]int{"10.244.0.11:8080": 1}); ok {
		t.Error("Matches ignored a real server at weight 0")
	} else if !strings.Contains(why, "10.244.0.12:8080") {
		t.Errorf("Matches explanation %q does not show the table", why)
	}
	if ok, _ := got.Matches("udp 10.96.1.10:80", map[string]int{"10.244.0.11:8080": 1}); !ok {
		t.Error("Matches rejected an exact match")
	}
	if _, err := parseIPVS("-X -q 1.2.3.4:5\n"); err == nil {
		t.Error("parseIPVS accepted an unknown line")
	}
}

func TestParseMetrics(t *testing.T) {
	m, err := parseMetrics(strings.NewReader(`# HELP x y
# TYPE kipvs_kernel_drift_repaired_total counter
kipvs_kernel_drift_repaired_total{ip_family="IPv4",kind="virtual_server"} 3
kipvs_kernel_drift_repaired_total{ip_family="IPv6",kind="virtual_server"} 1
kipvs_kernel_drift_repaired_total{ip_family="IPv4",kind="ipset_member"} 2
kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4"} 1.7e+09
kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds{ip_family="IPv4"} 1.6e+09
kubeproxy_sync_proxy_rules_service_changes_pending 0
kubeproxy_sync_proxy_rules_endpoint_changes_pending 0
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Get("kipvs_kernel_drift_repaired_total", `kind="virtual_server"`); got != 4 {
		t.Errorf("sum over families = %v, want 4", got)
	}
	if got := m.Get("kipvs_kernel_drift_repaired_total", `kind="virtual_server"`, `ip_family="IPv4"`); got != 3 {
		t.Errorf("IPv4 only = %v, want 3", got)
	}
	if got := m.Get("kipvs_kernel_drift_repaired_total"); got != 6 {
		t.Errorf("all = %v, want 6", got)
	}
	if ok, why := m.Synced(); !ok {
		t.Errorf("Synced = false (%s), want true", why)
	}
	m[`kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds{ip_family="IPv4"}`] = 1.8e9
	if ok, _ := m.Synced(); ok {
		t.Error("Synced = true with a request queued after the last sync")
	}
	m[`kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds{ip_family="IPv4"}`] = 0
	m["kubeproxy_sync_proxy_rules_endpoint_changes_pending"] = 1
	if ok, _ := m.Synced(); ok {
		t.Error("Synced = true with a change pending")
	}
}

func TestWithoutFlag(t *testing.T) {
	got := WithoutFlag([]string{"run", "--cluster-cidr", "10.0.0.0/8", "--v", "2", "--cluster-cidr=1.0.0.0/8", "--cluster-cidr-x", "y"}, "--cluster-cidr")
	want := []string{"run", "--v", "2", "--cluster-cidr-x", "y"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("WithoutFlag = %q, want %q", got, want)
	}
}

func TestParseAnswer(t *testing.T) {
	a, err := parseAnswer("pod-a [::ffff:10.244.0.1]:51234\n")
	if err != nil {
		t.Fatal(err)
	}
	if a.Backend != "pod-a" || a.Source != netip.MustParseAddrPort("10.244.0.1:51234") {
		t.Fatalf("parseAnswer = %+v", a)
	}
	if _, err := parseAnswer("garbage"); err == nil {
		t.Error("parseAnswer accepted a line without an address")
	}
}
