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
