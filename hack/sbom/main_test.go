package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// TestSBOM writes the document for this test binary (which carries Go build information) and
// two Debian packages: SPDX 2.3, the binary described with its digest, every module of the
// binary's build information and each package contained at its version, the time from
// SOURCE_DATE_EPOCH; a second run gives the same bytes.
func TestSBOM(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pk := filepath.Join(dir, "packages.json")
	if err := os.WriteFile(pk, []byte(`{"arm64":[{"name":"libc6","version":"2.36-9+deb12u14","architecture":"arm64","file":"libc6_2.36-9+deb12u14_arm64.deb","sha256":"ab"},
{"name":"netbase","version":"6.4","architecture":"all","file":"netbase_6.4_all.deb","sha256":"cd"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	write := func(out string) []byte {
		t.Helper()
		if err := run([]string{"--binary", self, "--packages", pk, "--arch", "arm64", "--name", "kipvs-linux-arm64", "--out", out}); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	raw := write(filepath.Join(dir, "a.json"))
	if again := write(filepath.Join(dir, "b.json")); string(again) != string(raw) {
		t.Error("two runs on the same inputs differ")
	}
	var doc document
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.SPDXVersion != "SPDX-2.3" || doc.CreationInfo.Created != "2023-11-14T22:13:20Z" || len(doc.DocumentDescribes) != 1 {
		t.Errorf("document header: %s %s %v", doc.SPDXVersion, doc.CreationInfo.Created, doc.DocumentDescribes)
	}
	contained := map[string]string{}
	for _, p := range doc.Packages {
		contained[p.Name] = p.VersionInfo
	}
	info, _ := debug.ReadBuildInfo()
	for _, m := range info.Deps {
		if contained[m.Path] != m.Version {
			t.Errorf("module %s %s: the SBOM says %q", m.Path, m.Version, contained[m.Path])
		}
	}
	if doc.Packages[0].Name != "kipvs-linux-arm64" || doc.Packages[0].Checksums[0].ChecksumValue == "" {
		t.Errorf("the described binary: %+v", doc.Packages[0])
	}
	for name, v := range map[string]string{"libc6": "2.36-9+deb12u14", "netbase": "6.4", "stdlib": info.GoVersion} {
		if contained[name] != v {
			t.Errorf("package %s: the SBOM says %q, want %s", name, contained[name], v)
		}
	}
	if n := strings.Count(string(raw), `"relationshipType": "CONTAINS"`); n != len(doc.Packages)-1 {
		t.Errorf("%d CONTAINS relationships for %d packages besides the binary", n, len(doc.Packages)-1)
	}
	if err := run([]string{"--binary", self, "--packages", pk, "--arch", "amd64", "--out", filepath.Join(dir, "c.json")}); err == nil || !strings.Contains(err.Error(), "no packages for --arch") {
		t.Errorf("an architecture the packages file lacks: %v", err)
	}
}
