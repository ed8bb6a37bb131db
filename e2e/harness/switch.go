package harness

import (
	"encoding/json"
	"strings"
)

// AdoptionPlan is what one family's first full sync changed of the kernel state kipvs found
// (the "adoption plan" debug line, logged with -v 4 and --logging-format json): one
// change per line in apply order ("update rs tcp/10.96.0.10:80 -> 10.244.0.11:8080 w=1",
// "apply iptables rules", ...), and for a rules apply, how the kernel's KUBE-* chains
// differed from kipvs's.
type AdoptionPlan struct {
	Family  string
	Changes []string
	Rules   []string
}

// AdoptionPlans returns the adoption plans in kipvs's JSON log, in log order. A family whose
// first sync changed nothing logs none.
func AdoptionPlans(log string) []AdoptionPlan {
	var out []AdoptionPlan
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, `"adoption plan"`) {
			continue
		}
		var e struct {
			Msg    string   `json:"msg"`
			Family string   `json:"family"`
			Plan   string   `json:"plan"`
			Rules  []string `json:"rules"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil || e.Msg != "adoption plan" {
			continue
		}
		p := AdoptionPlan{Family: e.Family, Rules: e.Rules}
		for _, c := range strings.Split(strings.TrimRight(e.Plan, "\n"), "\n") {
			if c != "" {
				p.Changes = append(p.Changes, c)
			}
		}
		out = append(out, p)
	}
	return out
}
