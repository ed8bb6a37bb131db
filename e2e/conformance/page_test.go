package conformance

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// docs/conformance.md's results are the generator's output, whole: one generated section,
// its headings the ones Render writes and in its order, no results heading written by hand
// outside it, and every note of notes.yaml about a test listed as not passing rendered there
// exactly as Render writes it (so an edit of either alone fails here until
// make conformance-doc has run).
func TestConformancePageIsGenerated(t *testing.T) {
	b, err := os.ReadFile("../../docs/conformance.md")
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	if strings.Count(page, BeginMarker) != 1 || strings.Count(page, EndMarker) != 1 {
		t.Fatalf("docs/conformance.md: want one generated section (%q ... %q)", BeginMarker, EndMarker)
	}
	before, rest, _ := strings.Cut(page, BeginMarker)
	section, after, _ := strings.Cut(rest, EndMarker)

	// The headings Render writes, in order, from a rendering of the test data.
	kv, err := ReadJUnit("testdata/junit_kipvs.xml")
	if err != nil {
		t.Fatal(err)
	}
	kp, _ := ReadJUnit("testdata/junit_kipvs.xml")
	failing := "[sig-network] Services should be able to change the type from ExternalName to ClusterIP [Conformance]"
	c := kv.Cases[failing]
	c.Status = Failed
	kv.Cases[failing] = c
	kp.Cases[failing] = c
	out, _ := Render(map[string]*Result{
		"kipvs":      {Run: Run{Proxy: "kipvs", Commit: "abc", Phases: []Phase{{"suite", time.Minute}}}, Report: kv},
		"kube-proxy": {Run: Run{Proxy: "kube-proxy"}, Report: kp},
	}, nil, "")
	rendered := headings(out)
	generated := append(rendered, "### Metrics side by side") // RenderMetrics' heading, when both runs saved /metrics
	got := headings(section)
	for _, h := range got {
		if !slices.Contains(generated, h) {
			t.Errorf("docs/conformance.md's generated section has %q, which the generator does not write (it writes %q)", h, generated)
		}
	}
	if i := slices.Index(got, "## Results"); i != 0 {
		t.Errorf("docs/conformance.md's generated section starts with %q, want ## Results", got)
	}
	for _, h := range append(headings(before), headings(after)...) {
		if slices.Contains(generated, h) {
			t.Errorf("docs/conformance.md has %q outside the generated section: results are generated whole", h)
		}
	}

	notes, err := ReadNotes("notes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	lists := map[string]string{"kipvs": subsectionOf(section, "### Not passing for kipvs"), "kube-proxy": subsectionOf(section, "### Not passing for kube-proxy")}
	// The nftables backend's section, when the page has one: RenderBackend's headings only.
	if _, rest, ok := strings.Cut(page, BackendBeginMarker); ok {
		backend, _, ok := strings.Cut(rest, BackendEndMarker)
		if !ok {
			t.Fatalf("docs/conformance.md: %q without %q", BackendBeginMarker, BackendEndMarker)
		}
		base, err := ColumnOf(section, "kipvs")
		if err != nil {
			t.Fatalf("docs/conformance.md's results: %v", err)
		}
		out, _ := RenderBackend(&Result{Run: Run{Proxy: BackendProxy}, Report: kv}, base, nil)
		if got, want := headings(backend), headings(out); !slices.Equal(got, want) {
			t.Errorf("docs/conformance.md's nftables backend section has headings %q, the generator writes %q", got, want)
		}
		lists[BackendProxy] = subsectionOf(backend, "### Not passing with the nftables backend")
	}
	for _, n := range notes {
		proxy := n.Proxy
		if proxy == "" {
			proxy = "kipvs"
		}
		list := lists[proxy]
		line := "- **" + escape(n.Test) + "**: " + n.Reason + " — " + reasons[n.Reason] + ". " + strings.TrimSpace(n.Evidence) + "\n"
		if strings.Contains(list, "- **"+escape(n.Test)+"**: ") && !strings.Contains(list, line) {
			t.Errorf("docs/conformance.md does not hold notes.yaml's %s note on %q as rendered (run make conformance-doc):\n%s", proxy, n.Test, line)
		}
	}
}

// headings returns the Markdown headings of text, outside code blocks.
func headings(text string) []string {
	var out []string
	inCode := false
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "```") {
			inCode = !inCode
		}
		if !inCode && strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}
