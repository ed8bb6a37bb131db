package rootfs

import (
	"bytes"
	"debug/elf"
	"errors"
	"io/fs"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kipvs/kipvs/hack/ociimage/oci"
)

func mustAdd(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestResolve(t *testing.T) {
	tr := oci.NewTree()
	mustAdd(t, tr.AddFile("usr/lib/x86_64-linux-gnu/libfoo.so.1.2", []byte("foo"), 0o644))
	mustAdd(t, tr.AddSymlink("usr/lib/x86_64-linux-gnu/libfoo.so.1", "libfoo.so.1.2"))
	mustAdd(t, tr.AddSymlink("lib", "usr/lib"))
	mustAdd(t, tr.AddSymlink("lib64/ld.so", "/lib/x86_64-linux-gnu/libfoo.so.1"))
	mustAdd(t, tr.AddSymlink("escape", "../../../usr/lib/x86_64-linux-gnu/libfoo.so.1"))
	mustAdd(t, tr.AddSymlink("loop1", "loop2"))
	mustAdd(t, tr.AddSymlink("loop2", "loop1"))
	src := TreeSource{Tree: tr}
	for in, want := range map[string]string{
		"lib64/ld.so":                       "usr/lib/x86_64-linux-gnu/libfoo.so.1.2",
		"/lib/x86_64-linux-gnu/libfoo.so.1": "usr/lib/x86_64-linux-gnu/libfoo.so.1.2",
		"escape":                            "usr/lib/x86_64-linux-gnu/libfoo.so.1.2",
		"lib/../lib/./x86_64-linux-gnu":     "usr/lib/x86_64-linux-gnu",
	} {
		got, _, err := Resolve(src, in)
		if err != nil || got != want {
			t.Errorf("Resolve(%s) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, _, err := Resolve(src, "loop1"); err == nil || !strings.Contains(err.Error(), "more than 40 symbolic links") {
		t.Errorf("Resolve(loop1): %v", err)
	}
	if _, _, err := Resolve(src, "lib/nothing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Resolve(lib/nothing): %v, want not-exist", err)
	}
}

func TestGlob(t *testing.T) {
	tr := oci.NewTree()
	mustAdd(t, tr.AddFile("usr/lib/x86_64-linux-gnu/xtables/libxt_a.so", nil, 0o644))
	mustAdd(t, tr.AddFile("usr/lib/x86_64-linux-gnu/xtables/libxt_b.so", nil, 0o644))
	mustAdd(t, tr.AddFile("usr/lib/x86_64-linux-gnu/xtables/README", nil, 0o644))
	mustAdd(t, tr.AddFile("usr/bin/cpp-12", nil, 0o755))
	mustAdd(t, tr.AddSymlink("usr/lib/cpp", "/usr/bin/cpp-12")) // a link to a file on the way
	src := TreeSource{Tree: tr}
	got, err := Glob(src, "usr/lib/*/xtables/*.so")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"usr/lib/x86_64-linux-gnu/xtables/libxt_a.so", "usr/lib/x86_64-linux-gnu/xtables/libxt_b.so"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("glob (-want +got):\n%s", diff)
	}
}

// dynamicELF returns a dynamically linked program of this machine with its interpreter.
func dynamicELF(t *testing.T) (string, *elf.File, string) {
	t.Helper()
	for _, p := range []string{"/usr/bin/true", "/bin/true"} {
		f, err := elf.Open(p)
		if err != nil {
			continue
		}
		interp, err := interpreter(f)
		if err == nil && interp != "" {
			return p, f, interp
		}
		f.Close()
	}
	t.Skip("no dynamically linked /usr/bin/true on this machine")
	return "", nil, ""
}

// TestSelectionLibraries picks a real dynamically linked program out of a tree laid out the way
// Debian 12's packages ship (not merged /usr: libc under usr/lib here, the loader under lib
// with an absolute link in lib64) and finds each library it loads copied, as content, to
// lib/MULTIARCH/NAME, and the loader to its interpreter path; a missing library is an error
// naming who needs it.
func TestSelectionLibraries(t *testing.T) {
	prog, f, interp := dynamicELF(t)
	defer f.Close()
	needed, err := f.ImportedLibraries()
	if err != nil {
		t.Fatal(err)
	}
	build := func(skip string) *oci.Tree {
		tr := oci.NewTree()
		data, err := os.ReadFile(prog)
		if err != nil {
			t.Fatal(err)
		}
		mustAdd(t, tr.AddFile("usr/bin/prog", data, 0o755))
		loader, err := os.ReadFile(interp)
		if err != nil {
			t.Fatal(err)
		}
		mustAdd(t, tr.AddFile("lib/x86_64-linux-gnu/real-loader.so", loader, 0o755))
		mustAdd(t, tr.AddSymlink(strings.TrimPrefix(interp, "/"), "/lib/x86_64-linux-gnu/real-loader.so"))
		for _, n := range needed {
			if n == skip {
				continue
			}
			lib, err := os.ReadFile("/lib/x86_64-linux-gnu/" + n)
			if err != nil {
				t.Skipf("%s: %v", n, err)
			}
			mustAdd(t, tr.AddFile("usr/lib/x86_64-linux-gnu/real-"+n, lib, 0o644))
			mustAdd(t, tr.AddSymlink("usr/lib/x86_64-linux-gnu/"+n, "real-"+n))
		}
		return tr
	}
	sel := Selection{Copy: []string{"usr/bin/prog"}, Multiarch: "x86_64-linux-gnu", Links: []Link{{"usr/bin/alias", "prog"}},
		Dirs: []Dir{{"tmp", 0o777 | fs.ModeSticky}}}
	out := oci.NewTree()
	if err := sel.Apply(TreeSource{Tree: build("")}, out); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range out.Entries() {
		if e.Type != oci.Dir || e.Path == "tmp" {
			got = append(got, e.Path)
		}
	}
	want := []string{strings.TrimPrefix(interp, "/")}
	for _, n := range needed {
		want = append(want, "lib/x86_64-linux-gnu/"+n)
	}
	want = append(want, "tmp", "usr/bin/alias", "usr/bin/prog")
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("selected files (-want +got):\n%s", diff)
	}
	for _, n := range needed {
		e, _ := out.Get("lib/x86_64-linux-gnu/" + n)
		if e.Type != oci.File || !bytes.HasPrefix(e.Data, []byte(elf.ELFMAG)) {
			t.Errorf("%s: copied as %v, not as the library's content", n, e.Type)
		}
	}
	if e, _ := out.Get(interp); e.Type != oci.File {
		t.Errorf("the interpreter %s is a %v, not a file", interp, e.Type)
	}

	err = sel.Apply(TreeSource{Tree: build(needed[0])}, oci.NewTree())
	if err == nil || !strings.Contains(err.Error(), "usr/bin/prog needs "+needed[0]) {
		t.Errorf("a missing %s: %v", needed[0], err)
	}
	if err := (Selection{Copy: []string{"usr/sbin/nothing-*"}}).Apply(TreeSource{Tree: build("")}, oci.NewTree()); err == nil || !strings.Contains(err.Error(), "matches nothing") {
		t.Errorf("a pattern matching nothing: %v", err)
	}
}

// TestSelectionAll takes a whole source less the dropped directories, links kept as links, with
// fixed files and links on top; a directory on disk gives the same tree as the same files in
// memory.
func TestSelectionAll(t *testing.T) {
	tr := oci.NewTree()
	mustAdd(t, tr.AddFile("bin/dash", []byte("dash"), 0o755))
	mustAdd(t, tr.AddSymlink("bin/sh", "dash"))
	mustAdd(t, tr.AddFile("usr/share/doc/dash/copyright", []byte("c"), 0o644))
	mustAdd(t, tr.AddFile("usr/share/dash/x", []byte("x"), 0o600))
	mustAdd(t, tr.AddFile("etc/passwd", []byte("from the package"), 0o644))
	sel := Selection{All: true, Drop: []string{"usr/share/doc"}, Links: []Link{{"bin/nc", "nc.openbsd"}},
		Files: []File{{Path: "etc/passwd", Data: "root:x:0:0::/root:/bin/sh\n", Mode: 0o644}}}
	type row struct {
		Path, Link, Data string
		Type             oci.EntryType
		Mode             fs.FileMode
	}
	rows := func(t *oci.Tree) []row {
		var out []row
		for _, e := range t.Entries() {
			out = append(out, row{e.Path, e.Linkname, string(e.Data), e.Type, e.Mode})
		}
		return out
	}
	fromTree := oci.NewTree()
	if err := sel.Apply(TreeSource{Tree: tr}, fromTree); err != nil {
		t.Fatal(err)
	}
	want := []row{
		{Path: "bin", Type: oci.Dir, Mode: 0o755},
		{Path: "bin/dash", Data: "dash", Type: oci.File, Mode: 0o755},
		{Path: "bin/nc", Link: "nc.openbsd", Type: oci.Symlink, Mode: 0o777},
		{Path: "bin/sh", Link: "dash", Type: oci.Symlink, Mode: 0o777},
		{Path: "etc", Type: oci.Dir, Mode: 0o755},
		{Path: "etc/passwd", Data: "root:x:0:0::/root:/bin/sh\n", Type: oci.File, Mode: 0o644},
		{Path: "usr", Type: oci.Dir, Mode: 0o755},
		{Path: "usr/share", Type: oci.Dir, Mode: 0o755},
		{Path: "usr/share/dash", Type: oci.Dir, Mode: 0o755},
		{Path: "usr/share/dash/x", Data: "x", Type: oci.File, Mode: 0o600},
	}
	if diff := cmp.Diff(want, rows(fromTree)); diff != "" {
		t.Errorf("from memory (-want +got):\n%s", diff)
	}
	dir := t.TempDir()
	if err := oci.WriteEntries(dir, tr.Entries()); err != nil {
		t.Fatal(err)
	}
	fromDir := oci.NewTree()
	if err := sel.Apply(DirSource{Root: dir}, fromDir); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, rows(fromDir)); diff != "" {
		t.Errorf("from a directory (-want +got):\n%s", diff)
	}
}
