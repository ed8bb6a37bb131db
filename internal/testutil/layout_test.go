package testutil_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// README's Layout section lists every directory under internal/ and cmd/ (one line each,
// starting with its path), so the map of the code stays whole as packages are added.
func TestREADMELayoutListsEveryPackage(t *testing.T) {
	root := filepath.Join("..", "..")
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, layout, ok := strings.Cut(string(readme), "\n## Layout\n")
	if !ok {
		t.Fatal("README.md has no Layout section")
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
				t.Errorf("README.md's Layout does not list %s/%s/", dir, e.Name())
			}
		}
	}
}
