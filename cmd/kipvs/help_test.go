package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// pflag prints the first back-quoted word of a flag's usage as its value name: usage that
// quotes a command (`kipvs doctor`) made `kipvs run --help` show
// "--kipvs-debug-endpoints kipvs doctor". Every flag of run shows a one-word value name,
// none for a boolean.
func TestRunHelpValueNames(t *testing.T) {
	cmd := newRunCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--help"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	help := out.String()
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		name, _ := pflag.UnquoteUsage(f)
		if strings.ContainsAny(name, " \t") || (f.Value.Type() == "bool" && name != "") {
			t.Errorf("--%s shows the value name %q", f.Name, name)
		}
	})
	for _, l := range strings.Split(help, "\n") {
		if strings.Contains(l, "--kipvs-debug-endpoints ") {
			if head, _, _ := strings.Cut(strings.TrimSpace(l), "   "); head != "--kipvs-debug-endpoints" {
				t.Errorf("help line %q, want the flag with no value name", head)
			}
			return
		}
	}
	t.Errorf("no --kipvs-debug-endpoints in the help:\n%s", help)
}
