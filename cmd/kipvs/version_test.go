package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/kipvs/kipvs/internal/version"
)

func TestVersionText(t *testing.T) {
	var out bytes.Buffer
	root := newRootCommand()
	root.SetOut(&out)
	root.SetArgs([]string{"version"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kipvs dev", "git commit:", "build date:", "go version: " + runtime.Version()} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("version output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestVersionJSON(t *testing.T) {
	var out bytes.Buffer
	root := newRootCommand()
	root.SetOut(&out)
	root.SetArgs([]string{"version", "-o", "json"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	var got map[string]string
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out.String())
	}
	if got["goVersion"] != runtime.Version() || got["version"] != "dev" {
		t.Errorf("unexpected fields: %v", got)
	}
}

func TestVersionBadOutput(t *testing.T) {
	root := newRootCommand()
	root.SetOut(&bytes.Buffer{})
	root.SetArgs([]string{"version", "-o", "yaml"})
	err := root.Execute()
	if err == nil || !strings.Contains(err.Error(), `--output "yaml"`) {
		t.Fatalf("want an error naming --output, got %v", err)
	}
}

// --version, as kube-proxy's (component-base's verflag): "--version" prints one line and
// quits, "--version=raw" the whole build information, "--version=false" runs as usual; it
// is accepted by every command, so `kipvs run --version` (a kube-proxy command line with
// kipvs's binary) quits too.
func TestVersionFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string // "" = no version printed, the command runs
	}{
		{[]string{"--version"}, "kipvs dev (kube-proxy v1.34 compatible)\n"},
		{[]string{"--version=true"}, "kipvs dev (kube-proxy v1.34 compatible)\n"},
		{[]string{"run", "--version"}, "kipvs dev (kube-proxy v1.34 compatible)\n"},
		{[]string{"--version=raw"}, fmt.Sprintf("%#v\n", version.Get())},
		{[]string{"version", "--version=false"}, ""},
		{[]string{"version", "--version=v1.2.3"}, ""},
	} {
		var out bytes.Buffer
		root := newRootCommand()
		root.SetOut(&out)
		root.SetArgs(c.args)
		err := root.Execute()
		if c.want == "" {
			if err != nil || !strings.HasPrefix(out.String(), "kipvs dev\n") {
				t.Errorf("%v: err %v, output %q, want the version command's", c.args, err, out.String())
			}
			continue
		}
		if !errors.Is(err, errVersionPrinted) || out.String() != c.want {
			t.Errorf("%v: err %v, output %q, want %q", c.args, err, out.String(), c.want)
		}
		if exitCode(err) != 0 {
			t.Errorf("%v: exit code %d, want 0", c.args, exitCode(err))
		}
	}
	root := newRootCommand()
	root.SetOut(&bytes.Buffer{})
	root.SetArgs([]string{"--version=maybe"})
	if err := root.Execute(); err == nil || !strings.Contains(err.Error(), `invalid argument "maybe" for "--version"`) {
		t.Errorf("--version=maybe: %v", err)
	}
}
