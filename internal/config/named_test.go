package config

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestNamedSettingsExist: every setting the package looks up by name (named("...") and
// settingNamed("...") in its source) is in the table, so no error path panics on a
// misspelt or removed name.
func TestNamedSettingsExist(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	lookup := regexp.MustCompile(`\b(?:named|settingNamed)\("([^"]+)"\)`)
	names := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range lookup.FindAllStringSubmatch(string(src), -1) {
			names++
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("%s looks up setting %q, which the table does not have: %v", f, m[1], r)
					}
				}()
				settingNamed(m[1])
			}()
		}
	}
	if names < 10 {
		t.Fatalf("found only %d look-ups by name; the pattern no longer matches the source", names)
	}
}
