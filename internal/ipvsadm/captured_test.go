package ipvsadm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// captured is one "=== ipvsadm ARGS [@snapshot]" section of a testdata ipvsadm*.txt file.
type captured struct {
	args     string
	snapshot string // file name in the state's directory
	output   string
}

func readCaptured(t *testing.T, path string) []captured {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []captured
	for _, sec := range strings.Split(string(b), "=== ipvsadm ")[1:] {
		head, body, _ := strings.Cut(sec, "\n")
		c := captured{args: head, snapshot: "snapshot.json", output: body}
		if args, snap, ok := strings.Cut(head, " @"); ok {
			c.args, c.snapshot = args, snap
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		t.Fatalf("%s: no sections", path)
	}
	return out
}

func loadSnapshot(t *testing.T, path string) (Snapshot, []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc JSONTable
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	s, err := doc.Snapshot()
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return s, b
}

// The formatter against ipvsadm 1.31's own output, captured in the test VM from kernel
// states built by cmd/kipvs's kernel tests (see testdata/README.md): each state's
// snapshot is `kipvs status -o json --nosort` (the kernel's order), taken when the state
// was the same just before and after ipvsadm ran.
func TestCapturedListings(t *testing.T) {
	states, _ := filepath.Glob("testdata/*/ipvsadm.txt")
	if len(states) < 2 {
		t.Fatalf("captured states: %v", states)
	}
	for _, path := range states {
		dir := filepath.Dir(path)
		for _, c := range readCaptured(t, path) {
			t.Run(filepath.Base(dir)+" "+c.args, func(t *testing.T) {
				snap, raw := loadSnapshot(t, filepath.Join(dir, c.snapshot))
				o, err := Parse(strings.Fields(c.args), nil)
				if err != nil {
					t.Fatal(err)
				}
				var b bytes.Buffer
				if err := WriteList(&b, o, snap, nil); err != nil {
					t.Fatal(err)
				}
				if b.String() != c.output {
					t.Errorf("differs from ipvsadm:\n%s", diffLines(c.output, b.String()))
				}
				// The snapshot is kipvs's own JSON: it must come back byte for byte.
				var js bytes.Buffer
				if err := writeJSON(&js, tableJSON(Options{NoSort: true}, snap, nil)); err != nil {
					t.Fatal(err)
				}
				if js.String() != string(raw) {
					t.Errorf("JSON round trip differs:\n%s", diffLines(string(raw), js.String()))
				}
			})
		}
	}
}

func TestCapturedConnections(t *testing.T) {
	states, _ := filepath.Glob("testdata/*/ipvsadm-conn.txt")
	if len(states) < 2 {
		t.Fatalf("captured states: %v", states)
	}
	for _, path := range states {
		dir := filepath.Dir(path)
		raw, err := os.ReadFile(filepath.Join(dir, "ip_vs_conn"))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range readCaptured(t, path) {
			t.Run(filepath.Base(dir)+" "+c.args, func(t *testing.T) {
				o, err := Parse(strings.Fields(c.args), nil)
				if err != nil {
					t.Fatal(err)
				}
				conns, err := readConns(bytes.NewReader(raw))
				if err != nil {
					t.Fatal(err)
				}
				var b bytes.Buffer
				if err := writeConns(&b, o, conns); err != nil {
					t.Fatal(err)
				}
				if b.String() != c.output {
					t.Errorf("differs from ipvsadm:\n%s", diffLines(c.output, b.String()))
				}
			})
		}
	}
}

func diffLines(want, got string) string {
	w, g := strings.SplitAfter(want, "\n"), strings.SplitAfter(got, "\n")
	var b strings.Builder
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d:\n  ipvsadm: %q\n  kipvs:   %q\n", i+1, wl, gl)
		}
	}
	return b.String()
}
