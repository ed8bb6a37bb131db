package harness

import (
	"reflect"
	"testing"
)

func TestAdoptionPlans(t *testing.T) {
	log := `{"level":"info","ts":"2025-01-01T00:00:00Z","msg":"adopting existing kernel state","family":"IPv4","changes":2}
not json: a line of klog
{"level":"debug","ts":"2025-01-01T00:00:00Z","msg":"adoption plan","family":"IPv4","plan":"update rs tcp/10.96.0.10:80 -> 10.244.0.11:8080 w=1\napply iptables rules\n","rules":["nat: chain KUBE-POSTROUTING: rule 3 is \"x\", want \"y\""]}
{"level":"debug","msg":"something else mentioning \"adoption plan\"","plan":"x"}
{"level":"debug","ts":"2025-01-01T00:00:01Z","msg":"adoption plan","family":"IPv6","plan":"apply iptables rules\n","rules":null}
`
	got := AdoptionPlans(log)
	want := []AdoptionPlan{
		{Family: "IPv4", Changes: []string{"update rs tcp/10.96.0.10:80 -> 10.244.0.11:8080 w=1", "apply iptables rules"},
			Rules: []string{`nat: chain KUBE-POSTROUTING: rule 3 is "x", want "y"`}},
		{Family: "IPv6", Changes: []string{"apply iptables rules"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("AdoptionPlans:\n got %#v\nwant %#v", got, want)
	}
}
