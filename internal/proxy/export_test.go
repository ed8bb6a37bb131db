package proxy

// BuildCase is a row of the build-case tables (service_test.go, validate_test.go) with its
// options applied to the test options, for the tests of package proxy_test.
type BuildCase struct {
	Name  string
	Opts  Options
	Input ServiceInput
}

// BuildCases returns every row of the build-case tables.
func BuildCases() []BuildCase {
	var out []BuildCase
	for _, tc := range allBuildCases() {
		o := testOptions()
		if tc.opts != nil {
			tc.opts(o)
		}
		out = append(out, BuildCase{Name: tc.name, Opts: *o, Input: ServiceInput{Service: tc.svc, Slices: tc.slices}})
	}
	return out
}

// NamedFilter is the filter facts of one test node, for the rendering tests of package
// proxy_test (rules_render_test.go).
type NamedFilter struct {
	Name string
	// Node groups the families of one dual-stack node (corpus variants only).
	Node   string
	Filter *Filter
}

func exportFilters(in []namedFilter) []NamedFilter {
	out := make([]NamedFilter, 0, len(in))
	for _, n := range in {
		out = append(out, NamedFilter{Name: n.name, Node: n.node, Filter: n.f})
	}
	return out
}

// RulesGoldenCases are the nodes of the rules-NAME.golden files.
func RulesGoldenCases() []NamedFilter { return exportFilters(rulesGoldenCases()) }

// SetReferenceCases are an empty node, one ClusterIP Service, and that without a detector.
func SetReferenceCases() []NamedFilter { return exportFilters(setReferenceCases()) }

// RuleVariants is the corpus of nodes that together render every rule (corpus_test.go),
// named NODE/FAMILY.
func RuleVariants() []NamedFilter {
	var out []NamedFilter
	for _, v := range ruleVariants() {
		out = append(out, NamedFilter{Name: v.node + "/" + v.opts.Family.String(), Node: v.node, Filter: BuildFilter(v.opts, v.desired)})
	}
	return out
}
