package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestKeptLoad(t *testing.T) {
	dir := t.TempDir()
	if _, err := keptLoad(dir, 4, 50000); err == nil || !strings.Contains(err.Error(), "no completed load") {
		t.Errorf("no marker: err = %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, loadedFile), []byte("50000 4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		e, first int
		want     int
		err      string
	}{
		{e: 4, first: 50000, want: 50000},
		{e: 4, first: 60000, want: 50000},
		{e: 10, first: 50000, err: "of 4 endpoints, not --e 10"},
		{e: 4, first: 10000, err: "holds 50000 Services, more than the first --n 10000"},
	} {
		n, err := keptLoad(dir, c.e, c.first)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("keptLoad(e=%d, first=%d) err = %v, want %q", c.e, c.first, err, c.err)
		case c.err == "" && (err != nil || n != c.want):
			t.Errorf("keptLoad(e=%d, first=%d) = %d, %v, want %d", c.e, c.first, n, err, c.want)
		}
	}
}
