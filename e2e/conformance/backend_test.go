package conformance

import (
	"maps"
	"strings"
	"testing"
	"time"
)

// The nftables backend's section: kipvs's cells are read back from a rendered results
// section, and a test that passed there and not with the nftables backend is a regression
// until a note explains it.
func TestRenderBackend(t *testing.T) {
	kv, err := ReadJUnit("testdata/junit_kipvs.xml")
	if err != nil {
		t.Fatal(err)
	}
	const (
		basic    = "[sig-network] Services should serve a basic endpoint from pods [Conformance]"
		external = "[sig-network] Services should be able to change the type from ExternalName to ClusterIP [Conformance]"
		dns      = "[sig-network] DNS should provide DNS for services [Conformance]"
	)
	results, _ := Render(map[string]*Result{"kipvs": {Run: Run{Proxy: "kipvs"}, Report: kv}}, nil, "")
	base, err := ColumnOf(results, "kipvs")
	if err != nil {
		t.Fatal(err)
	}
	want := Column{basic: "pass 40s", external: "**FAIL** 1m1s", dns: "pass 15s"}
	if !maps.Equal(base, want) {
		t.Errorf("kipvs's column read back: %q, want %q", base, want)
	}
	if _, err := ColumnOf(results, "kipvs-nftables"); err == nil {
		t.Error("a column the table does not have was read")
	}

	nft, _ := ReadJUnit("testdata/junit_kipvs.xml")
	nft.Cases[external] = Case{Name: external, Status: Passed, Time: 2 * time.Second}
	c := nft.Cases[dns]
	c.Status, c.Message = Failed, "no answer"
	nft.Cases[dns] = c
	res := &Result{Run: Run{Proxy: BackendProxy, Commit: "abc", Phases: []Phase{{"suite", time.Minute}}}, Report: nft}
	out, sum := RenderBackend(res, base, nil)
	for _, s := range []string{
		BackendBeginMarker, BackendEndMarker,
		"| " + basic + " | pass 40s | pass 40s |",
		"| " + external + " | **FAIL** 1m1s | pass 2s |",
		"| " + dns + " | pass 15s | **FAIL** 15s |",
		"**2 of 2** that ran passed",
		"2 of the tests it ran passed for kipvs with the iptables backend; **1 of them did not pass with the nftables backend**",
		"- **" + dns + "**: failed. No reason recorded yet",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("rendering lacks %q:\n%s", s, out)
		}
	}
	if len(sum.Regressions) != 1 || sum.Regressions[0] != dns || len(sum.Unexplained) != 1 {
		t.Errorf("summary %+v", sum)
	}
	out, sum = RenderBackend(res, base, []Note{{Test: dns, Proxy: BackendProxy, Reason: "environment", Evidence: "the VM was out of memory."}})
	if len(sum.Unexplained) != 0 || !strings.Contains(out, "environment — the test environment, not the proxy. the VM was out of memory.") {
		t.Errorf("note not used: %+v\n%s", sum, out)
	}

	doc, err := SpliceBackend("# Title\n\n"+results, out)
	if err != nil {
		t.Fatal(err)
	}
	again, err := SpliceBackend(doc, out)
	if err != nil || again != doc {
		t.Errorf("splicing the same section twice changed the page (%v)", err)
	}
	if !strings.Contains(doc, EndMarker+"\n\n"+BackendBeginMarker) {
		t.Errorf("the backend's section is not appended after the results:\n%s", doc)
	}
}
