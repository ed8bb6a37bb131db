package testutil_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// docs/development.md's Layout section lists every directory under internal/ and cmd/ (one
// line each, starting with its path), so the map of the code stays whole as packages are
// added.
func TestLayoutListsEveryPackage(t *testing.T) {
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "development.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, layout, ok := strings.Cut(string(doc), "\n## Layout\n")
	if !ok {
		t.Fatal("docs/development.md has no Layout section")
	}
	layout, _, _ = strings.Cut(layout, "\n## ")
	listed := map[string]bool{}
	for _, l := range strings.Split(layout, "\n") {
		if f := strings.Fields(l); len(f) > 0 && strings.HasSuffix(f[0], "/") {
			listed[strings.TrimSuffix(f[0], "/")] = true
		}
	}
	for _, dir := range []string{"internal", "cmd"} {
		entries, err := os.ReadDir(filepath.Join(root, dir))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.IsDir() && !listed[dir+"/"+e.Name()] {
				t.Errorf("docs/development.md's Layout does not list %s/%s/", dir, e.Name())
			}
		}
	}
}

// The first two commands a reader of README.md meets are `make demo` and `make test`, in
// the first code block, and both are targets the Makefile declares.
func TestREADMEStartsWithDemoAndTest(t *testing.T) {
	root := filepath.Join("..", "..")
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(readme), "\n```sh\n")
	if !ok {
		t.Fatal("README.md has no sh code block")
	}
	block, _, _ = strings.Cut(block, "\n```")
	var cmds []string
	for _, l := range strings.Split(block, "\n") {
		cmd, _, _ := strings.Cut(l, "#")
		if cmd = strings.TrimSpace(cmd); cmd != "" {
			cmds = append(cmds, cmd)
		}
	}
	if len(cmds) < 2 || cmds[0] != "make demo" || cmds[1] != "make test" {
		t.Errorf("README.md's first commands are %q, want make demo, then make test", cmds)
	}
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"demo", "test"} {
		if !strings.Contains(string(makefile), "\n"+target+":") {
			t.Errorf("the Makefile has no target %s, which README.md's first commands run", target)
		}
	}
}
