package vm

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// readTree maps every file under dir to its content ("d/" for a directory).
func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			out[rel+"/"] = ""
			return nil
		}
		b, err := os.ReadFile(p)
		out[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCopyTree(t *testing.T) {
	src, dst := t.TempDir(), filepath.Join(t.TempDir(), "out")
	for p, c := range map[string]string{
		"profiles/run-kipvs-10/cpu-idle.pprof": "cpu",
		"profiles/run-kipvs-10/heap-end.pprof": "heap",
		"top.txt":                              "top",
	} {
		if err := os.MkdirAll(filepath.Join(src, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, p), []byte(c), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(src, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	// What dst held before stays, but a file of the same path is replaced.
	if err := os.MkdirAll(filepath.Join(dst, "profiles", "run-kipvs-10"), 0o755); err != nil {
		t.Fatal(err)
	}
	for p, c := range map[string]string{"old.json": "old", "profiles/run-kipvs-10/heap-end.pprof": "an older and longer heap"} {
		if err := os.WriteFile(filepath.Join(dst, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := copyTree(src, dst); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"empty/": "", "old.json": "old", "profiles/": "", "profiles/run-kipvs-10/": "",
		"profiles/run-kipvs-10/cpu-idle.pprof": "cpu", "profiles/run-kipvs-10/heap-end.pprof": "heap", "top.txt": "top",
	}
	if diff := cmp.Diff(want, readTree(t, dst)); diff != "" {
		t.Errorf("copyTree: dst differs (-want +got):\n%s", diff)
	}

	// No artifacts: nothing to copy, and no error.
	none := filepath.Join(t.TempDir(), "none")
	if err := copyTree(filepath.Join(src, "missing"), none); err != nil {
		t.Errorf("copyTree of a missing directory: %v", err)
	}
	if _, err := os.Stat(none); !os.IsNotExist(err) {
		t.Errorf("copyTree of a missing directory created %s: %v", none, err)
	}
}
