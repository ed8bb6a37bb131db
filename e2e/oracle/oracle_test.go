package oracle

import (
	"os"
	"strings"
	"testing"

	"github.com/kipvs/kipvs/internal/ipvsmode"
)

// The page is rendered from the data file: editing one without the other fails here.
func TestPageIsRendered(t *testing.T) {
	ds, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../docs/differences-from-kube-proxy.md")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != ds.Render() {
		t.Fatal("docs/differences-from-kube-proxy.md is not the rendering of e2e/oracle/differences.yaml: run go run ./e2e/oracle/cmd/render-differences")
	}
}

func TestExplain(t *testing.T) {
	ds, err := Parse([]byte(`
- id: a
  area: x
  kubeProxy: y
  kipvs: z
  why: w
  kernel:
  - {section: iptables, side: kipvs, line: '-A KUBE-X .*', cases: [c1]}
  config:
  - {case: row, field: ipvs.scheduler}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		c, section string
		side       Side
		line       string
		want       bool
	}{
		{"c1", "iptables", Kipvs, "-A KUBE-X -j ACCEPT", true},
		{"c2", "iptables", Kipvs, "-A KUBE-X -j ACCEPT", false},
		{"c1", "iptables", KubeProxy, "-A KUBE-X -j ACCEPT", false},
		{"c1", "ipset", Kipvs, "-A KUBE-X -j ACCEPT", false},
		{"c1", "iptables", Kipvs, "x -A KUBE-X -j ACCEPT", false}, // anchored
	} {
		if got := ds.ExplainKernel(tc.c, tc.section, tc.side, tc.line) != nil; got != tc.want {
			t.Errorf("ExplainKernel(%q, %q, %q, %q) = %v, want %v", tc.c, tc.section, tc.side, tc.line, got, tc.want)
		}
	}
	if ds.ExplainConfig("row", "ipvs.scheduler") == nil || ds.ExplainConfig("row", "") != nil {
		t.Error("ExplainConfig matches the wrong rows")
	}
}

func TestParseRefuses(t *testing.T) {
	for name, doc := range map[string]string{
		"no why":       "- {id: a, area: x, kubeProxy: y, kipvs: z}",
		"duplicate id": "- {id: a, area: x, kubeProxy: y, kipvs: z, why: w}\n- {id: a, area: x, kubeProxy: y, kipvs: z, why: w}",
		"bad section":  "- {id: a, area: x, kubeProxy: y, kipvs: z, why: w, kernel: [{section: nft, side: kipvs, line: x}]}",
		"bad side":     "- {id: a, area: x, kubeProxy: y, kipvs: z, why: w, kernel: [{section: ipvs, side: both, line: x}]}",
		"bad regexp":   "- {id: a, area: x, kubeProxy: y, kipvs: z, why: w, kernel: [{section: ipvs, side: kipvs, line: '('}]}",
		"unknown key":  "- {id: a, area: x, kubeProxy: y, kipvs: z, why: w, reason: v}",
	} {
		if _, err := Parse([]byte(doc)); err == nil {
			t.Errorf("%s: accepted", name)
		} else if !strings.Contains(err.Error(), "differences.yaml") {
			t.Errorf("%s: error %q does not name the file", name, err)
		}
	}
}

// The schedulers the differences page (and docs/traffic-policy.md) name for the
// kipvs.io/scheduler annotation are the ones kipvs takes (ipvsmode.Schedulers), in order.
func TestSchedulerListInStep(t *testing.T) {
	ds, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join(ipvsmode.Schedulers(), ", ")
	found := false
	for _, d := range ds {
		if d.ID == "per-service-scheduler" {
			found = true
			if !strings.Contains(d.Kipvs, "("+want+")") {
				t.Errorf("differences.yaml per-service-scheduler does not list the schedulers (%s):\n%s", want, d.Kipvs)
			}
		}
	}
	if !found {
		t.Error("differences.yaml has no per-service-scheduler entry")
	}
	page, err := os.ReadFile("../../docs/traffic-policy.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), "`kipvs.io/scheduler` ("+want+")") {
		t.Errorf("docs/traffic-policy.md does not list the schedulers `kipvs.io/scheduler` (%s)", want)
	}
}
