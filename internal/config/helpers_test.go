package config

import (
	"errors"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/spf13/pflag"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// cmpConfig compares Configs; nil and empty slices and maps are equal.
func cmpConfig() []cmp.Option {
	return []cmp.Option{
		cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
		cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
		cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b }),
		cmpopts.EquateEmpty(),
	}
}

// loadArgs registers the flags on a fresh flag set, parses args and loads.
func loadArgs(t *testing.T, log *zap.Logger, args ...string) (Config, error) {
	t.Helper()
	fs := pflag.NewFlagSet("kipvs", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	return Load(f, log)
}

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeFile writes a config file into a temporary directory and returns its path.
func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// fieldErrors flattens an error tree (errors.Join, %w) into its *FieldError leaves and
// fails the test if a leaf is not a *FieldError.
func fieldErrors(t *testing.T, err error) []*FieldError {
	t.Helper()
	var out []*FieldError
	var walk func(error)
	walk = func(e error) {
		if fe, ok := e.(*FieldError); ok {
			out = append(out, fe)
			return
		}
		switch u := e.(type) {
		case interface{ Unwrap() []error }:
			for _, x := range u.Unwrap() {
				walk(x)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		default:
			t.Errorf("error %q (%T) is not a *FieldError", e, e)
		}
	}
	if err != nil {
		walk(err)
	}
	return out
}

// wantFieldErrors checks that err holds exactly the given field errors (matched by field
// path, flag and value, in any order) and that each message names them.
func wantFieldErrors(t *testing.T, err error, want ...FieldError) {
	t.Helper()
	got := fieldErrors(t, err)
	type key struct{ field, flag, value string }
	gotKeys := map[key]*FieldError{}
	for _, fe := range got {
		gotKeys[key{fe.Field, fe.Flag, fe.Value}] = fe
		msg := fe.Error()
		value := fe.Value
		if value == "" {
			value = `""`
		}
		for _, part := range []string{fe.Field, fe.Flag, value} {
			if part != "" && !strings.Contains(msg, part) {
				t.Errorf("message %q does not name %q", msg, part)
			}
		}
	}
	for _, w := range want {
		fe, ok := gotKeys[key{w.Field, w.Flag, w.Value}]
		if !ok {
			t.Errorf("missing error for field %q flag %q value %q; got:\n%v", w.Field, w.Flag, w.Value, err)
			continue
		}
		if w.Detail != "" && !strings.Contains(fe.Detail, w.Detail) {
			t.Errorf("error %q: detail does not contain %q", fe, w.Detail)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d errors, want %d:\n%v", len(got), len(want), err)
	}
}

// observed returns a logger that records Info and above.
func observed() (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.InfoLevel)
	return zap.New(core), logs
}

func noticeFields(logs *observer.ObservedLogs) []string {
	var out []string
	for _, e := range logs.All() {
		out = append(out, e.ContextMap()["field"].(string))
	}
	return out
}

func mustPrefix(s string) netip.Prefix     { return netip.MustParsePrefix(s) }
func mustAddrPort(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

func isFieldError(err error) bool {
	var fe *FieldError
	return errors.As(err, &fe)
}
