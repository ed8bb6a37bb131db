package golden

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/kipvs/kipvs/internal/kerr"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// Updating reports whether -update was given.
func Updating() bool { return *update }

// Dir is the testdata directory of the package whose test called it (skip 0: the direct
// caller of the exported function).
func dir(skip int) string {
	if _, file, _, ok := runtime.Caller(skip + 2); ok && filepath.IsAbs(file) {
		return filepath.Join(filepath.Dir(file), "testdata")
	}
	return "testdata"
}

// Check compares got with testdata/name of the calling package, or writes it with -update.
func Check(t testing.TB, name, got string) {
	t.Helper()
	path := filepath.Join(dir(0), name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run the package's fake tests with -update and review the diff)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs from the golden file (-want +got):\n%s", path, diff)
	}
}

// Outcome names an error by its kerr type and errno, which the real adapters and their
// fakes share: "ok", "error: not found ENOENT", "error: untyped error: ...".
func Outcome(err error) string {
	if err == nil {
		return "ok"
	}
	var kind string
	switch {
	case kerr.IsNotFound(err):
		kind = "not found"
	case kerr.IsExists(err):
		kind = "exists"
	case kerr.IsInvalid(err):
		kind = "invalid"
	case kerr.IsBusy(err):
		kind = "busy"
	default:
		kind = "untyped error: " + err.Error()
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		kind += " " + unix.ErrnoName(errno)
	}
	return "error: " + kind
}
