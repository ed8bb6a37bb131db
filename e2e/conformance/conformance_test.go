package conformance

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseJUnitGinkgo(t *testing.T) {
	rep, err := ReadJUnit("testdata/junit_kipvs.xml")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Status{
		"[SynchronizedBeforeSuite]": Passed,
		"[sig-network] Services should serve a basic endpoint from pods [Conformance]":                          Passed,
		"[sig-network] Services should be able to change the type from ExternalName to ClusterIP [Conformance]": Failed,
		"[sig-network] Services should preserve source pod IP for traffic thru service cluster IP [LinuxOnly]":  Skipped,
		"[sig-network] DNS should provide DNS for services [Conformance]":                                       Passed,
	}
	if len(rep.Cases) != len(want) {
		t.Fatalf("cases %v, want %d", rep.Names(), len(want))
	}
	for n, s := range want {
		if got := rep.Cases[n].Status; got != s {
			t.Errorf("%s: %q, want %q", n, got, s)
		}
	}
	f := rep.Cases["[sig-network] Services should be able to change the type from ExternalName to ClusterIP [Conformance]"]
	if f.Message != "Timed out after 60s." || f.Time != 60900*time.Millisecond {
		t.Errorf("failure %+v", f)
	}
	if rep.Time != 120500*time.Millisecond {
		t.Errorf("suite time %s", rep.Time)
	}
}

func TestRenderSideBySide(t *testing.T) {
	kv, err := ReadJUnit("testdata/junit_kipvs.xml")
	if err != nil {
		t.Fatal(err)
	}
	kp, _ := ReadJUnit("testdata/junit_kipvs.xml")
	kp.Cases["[sig-network] Services should be able to change the type from ExternalName to ClusterIP [Conformance]"] = Case{
		Name: "x", Status: Passed, Time: time.Second}
	res := map[string]*Result{
		"kipvs":      {Run: Run{Proxy: "kipvs", Commit: "abc", Phases: []Phase{{"suite", time.Minute}}}, Report: kv},
		"kube-proxy": {Run: Run{Proxy: "kube-proxy"}, Report: kp},
	}
	out, sum := Render(res, nil)
	for _, s := range []string{
		"| [sig-network] Services should serve a basic endpoint from pods [Conformance] | pass 40s | pass 40s |",
		"| [sig-network] Services should be able to change the type from ExternalName to ClusterIP [Conformance] | pass 1s | **FAIL** 1m1s |",
		"kipvs: `[sig-network] Services` `[Conformance]`: **1 of 2** that ran passed.",
		"kube-proxy: `[sig-network] Services` `[Conformance]`: **2 of 2** that ran passed.",
		"**1 test(s) passed with kube-proxy and not with kipvs**",
		"No reason recorded yet",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("rendering lacks %q:\n%s", s, out)
		}
	}
	if strings.Contains(out, "preserve source pod IP") {
		t.Errorf("a test skipped in every run is listed as run:\n%s", out)
	}
	if len(sum.Regressions) != 1 || len(sum.Unexplained) != 1 {
		t.Errorf("summary %+v", sum)
	}
	out, sum = Render(res, []Note{{Test: "[sig-network] Services should be able to change the type from ExternalName to ClusterIP [Conformance]",
		Proxy: "kipvs", Reason: "environment", Evidence: "the VM was out of memory."}})
	if len(sum.Unexplained) != 0 || !strings.Contains(out, "environment — the test environment, not the proxy. the VM was out of memory.") {
		t.Errorf("note not used: %+v\n%s", sum, out)
	}
}

func TestSplice(t *testing.T) {
	doc := "# Title\n\nhand-written\n\n" + BeginMarker + "\nold\n" + EndMarker + "\n\n## After\n"
	got, err := Splice(doc, BeginMarker+"\nnew\n"+EndMarker+"\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := "# Title\n\nhand-written\n\n" + BeginMarker + "\nnew\n" + EndMarker + "\n\n## After\n"; got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
	if _, err := Splice(EndMarker+BeginMarker, "x"); err == nil {
		t.Error("broken markers accepted")
	}
}

func TestNotesFileIsValid(t *testing.T) {
	if _, err := ReadNotes("notes.yaml"); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "n.yaml")
	os.WriteFile(bad, []byte("- test: x\n  reason: flaky\n  evidence: y\n"), 0o644)
	if _, err := ReadNotes(bad); err == nil || !strings.Contains(err.Error(), `reason "flaky"`) {
		t.Errorf("a bad reason: %v", err)
	}
}
