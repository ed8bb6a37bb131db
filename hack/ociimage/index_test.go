package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kipvs/kipvs/hack/ociimage/oci"
)

// TestBuildIndexReproducible runs `build --arch amd64,arm64` with the same inputs copied into
// two directories (other paths, other file times): both give the same image index digest and
// archive bytes, holding a linux/amd64 and a linux/arm64 image each with its own input. Another
// SOURCE_DATE_EPOCH gives another digest. --packages-out lists both architectures.
func TestBuildIndexReproducible(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	build := func(mtime time.Time) (string, []byte, string) {
		t.Helper()
		dir := t.TempDir()
		for _, a := range []string{"amd64", "arm64"} {
			f := filepath.Join(dir, "pause-"+a)
			if err := os.WriteFile(f, []byte("#!pause "+a), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(f, mtime, mtime); err != nil {
				t.Fatal(err)
			}
		}
		out := filepath.Join(dir, "index.tar")
		if err := run([]string{"build", "pause", "--arch", "amd64,arm64", "--input", "pause=" + filepath.Join(dir, "pause-{arch}"),
			"--out", out, "--digest-file", out + ".digest", "--packages-out", filepath.Join(dir, "packages.json")}); err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		d, err := os.ReadFile(out + ".digest")
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(d)), raw, dir
	}
	d1, raw1, dir1 := build(time.Unix(1, 0))
	d2, raw2, _ := build(time.Unix(2_000_000_000, 0))
	if d1 != d2 || !slices.Equal(raw1, raw2) {
		t.Errorf("same inputs in two directories: index digests %s and %s (archives equal: %v)", d1, d2, slices.Equal(raw1, raw2))
	}
	a, err := oci.ReadIndexArchiveFile(filepath.Join(dir1, "index.tar"))
	if err != nil {
		t.Fatal(err)
	}
	if a.IndexDigest != d1 {
		t.Errorf("--digest-file holds %s, the archive's image index is %s", d1, a.IndexDigest)
	}
	var got []string
	for _, img := range a.Images {
		got = append(got, img.Config.OS+"/"+img.Config.Architecture+": "+string(img.Layers[0][0].Data))
	}
	if want := []string{"linux/amd64: #!pause amd64", "linux/arm64: #!pause arm64"}; !slices.Equal(got, want) {
		t.Errorf("images %q, want %q", got, want)
	}
	var pkgs map[string][]usedPackage
	if b, err := os.ReadFile(filepath.Join(dir1, "packages.json")); err != nil || json.Unmarshal(b, &pkgs) != nil {
		t.Fatalf("packages.json: %v: %s", err, b)
	}
	if len(pkgs) != 2 || pkgs["amd64"] == nil || pkgs["arm64"] == nil {
		t.Errorf("packages.json = %v, want an empty list for amd64 and arm64", pkgs)
	}

	t.Setenv("SOURCE_DATE_EPOCH", "1700000001")
	if d3, _, _ := build(time.Unix(1, 0)); d3 == d1 {
		t.Errorf("another SOURCE_DATE_EPOCH kept the index digest %s", d3)
	}
}

// TestBuildRefusesAnotherMachine: an ELF input for another architecture than the image's is
// refused (the test binary itself, for the host, given as arm64's or amd64's, whichever the
// host is not); --arch takes amd64 and arm64 only, and {arch} needs --arch.
func TestBuildRefusesAnotherMachine(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	other := "arm64"
	if runtime.GOARCH == "arm64" {
		other = "amd64"
	}
	out := filepath.Join(t.TempDir(), "x.tar")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"build", "pause", "--arch", other, "--input", "pause=" + self, "--out", out}, "not " + elfMachines[other].String()},
		{[]string{"build", "pause", "--arch", "riscv64", "--input", "pause=" + self, "--out", out}, "--arch riscv64: not one of amd64, arm64"},
		{[]string{"build", "pause", "--input", "pause=" + self + "-{arch}", "--out", out}, "{arch} needs --arch"},
	} {
		if err := run(c.args); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error with %q", c.args, err, c.want)
		}
	}
}
