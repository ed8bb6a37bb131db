package netfilter

import (
	"testing"

	"github.com/kipvs/kipvs/internal/inet"
)

// Exports for the external tests (package netfilter_test), which use the fake
// (netfiltertest) and so cannot be in package netfilter.

// ScenarioEnv is the environment runScenario drives an implementation in.
type ScenarioEnv = scenarioEnv

// OwnedChains is the owned chain set WithOwned takes.
type OwnedChains = ownedChains

var (
	RunScenario  = runScenario
	RulesetV1    = rulesetV1
	RulesetV2    = rulesetV2
	Dump         = dump
	WithOwned    = withOwned
	ScenarioSets = scenarioSets
)

// NewScenarioEnv returns the environment for nf: foreign applies a payload as another
// program would, saveAll prints the filter and nat tables.
func NewScenarioEnv(nf Interface, foreign func(t *testing.T, payload string), saveAll func(t *testing.T) string) ScenarioEnv {
	return scenarioEnv{nf: nf, foreign: foreign, saveAll: saveAll}
}

// SetName is the ipset name of scenario set s for family f.
func SetName(f inet.Family, s string) string { return famOf(f).set(s) }

// PlanJumps is planJumps on a chain holding the rules cur.
func PlanJumps(chain string, cur, want []string, own map[string]bool) (dels, ins []string) {
	rules := make([]savedRule, len(cur))
	for i, s := range cur {
		rules[i] = savedRule{spec: s}
	}
	return planJumps(chain, rules, want, own)
}

// SavedSpecs parses iptables-save output of table and returns the rules of chain.
func SavedSpecs(table Table, save []byte, chain string) ([]string, error) {
	st, err := parseSave(table, save)
	if err != nil {
		return nil, err
	}
	return st.chains[chain].specs(), nil
}

// Foreign applies payload as another program would (the environment's foreign).
func (e scenarioEnv) Foreign(t *testing.T, payload string) { e.foreign(t, payload) }
