package conformance

import (
	"os"
	"path/filepath"
	"reflect"
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
		"[SynchronizedBeforeSuite]":                                                                             Setup,
		"[ReportAfterSuite] Kubernetes e2e suite report":                                                        Setup,
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
	if m := rep.Cases["[sig-network] Services should preserve source pod IP for traffic thru service cluster IP [LinuxOnly]"].Message; m != "requires at least 2 nodes" {
		t.Errorf("skip message %q", m)
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
	out, sum := Render(res, nil, "")
	for _, s := range []string{
		"| [sig-network] Services should serve a basic endpoint from pods [Conformance] | pass 40s | pass 40s |",
		"| [sig-network] Services should be able to change the type from ExternalName to ClusterIP [Conformance] | pass 1s | **FAIL** 1m1s |",
		"kipvs: the Service `[Conformance]` tests (`[sig-network] Services` and `Service endpoints latency`, 18 in v1.34.10): **1 of 2** that ran passed.",
		"kube-proxy: the Service `[Conformance]` tests (`[sig-network] Services` and `Service endpoints latency`, 18 in v1.34.10): **2 of 2** that ran passed.",
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
		Proxy: "kipvs", Reason: "environment", Evidence: "the VM was out of memory."}}, "")
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

func TestCompareMetrics(t *testing.T) {
	kp, err := ParseMetrics(strings.NewReader(`# TYPE kubeproxy_sync_proxy_rules_duration_seconds histogram
kubeproxy_sync_proxy_rules_duration_seconds_bucket{le="+Inf"} 3
kubeproxy_sync_proxy_rules_duration_seconds_sum 0.3
kubeproxy_sync_proxy_rules_duration_seconds_count 3
# TYPE kubeproxy_sync_proxy_rules_endpoint_changes_total counter
kubeproxy_sync_proxy_rules_endpoint_changes_total 5
# TYPE rest_client_requests_total counter
rest_client_requests_total{code="200",host="10.0.0.1:6443",method="GET"} 9
# TYPE workqueue_depth gauge
workqueue_depth{name="x"} 0
`))
	if err != nil {
		t.Fatal(err)
	}
	kv, err := ParseMetrics(strings.NewReader(`# TYPE kubeproxy_sync_proxy_rules_duration_seconds histogram
kubeproxy_sync_proxy_rules_duration_seconds_bucket{le="+Inf"} 0
kubeproxy_sync_proxy_rules_duration_seconds_sum 0
kubeproxy_sync_proxy_rules_duration_seconds_count 0
# TYPE kubeproxy_sync_proxy_rules_endpoint_changes_total gauge
kubeproxy_sync_proxy_rules_endpoint_changes_total 5
# TYPE rest_client_requests_total counter
rest_client_requests_total{code="201",host="10.0.0.1:6443",method="GET"} 9
# TYPE kipvs_services_not_programmed gauge
kipvs_services_not_programmed{reason="x"} 0
`))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range CompareMetrics(kp, kv) {
		got = append(got, d.Family+" "+d.Kind+" "+d.Detail)
	}
	want := []string{
		"kipvs_services_not_programmed only-kipvs gauge",
		"kubeproxy_sync_proxy_rules_duration_seconds observed observed something: kube-proxy true, kipvs false",
		"kubeproxy_sync_proxy_rules_endpoint_changes_total type kube-proxy counter, kipvs gauge",
		`rest_client_requests_total values code: kube-proxy ["200"], kipvs ["201"]`,
		"workqueue_depth only-kube-proxy gauge",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("findings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	md, un := RenderMetrics(CompareMetrics(kp, kv), len(kp), len(kv), func(f, k string) string {
		if k == "only-kipvs" {
			return "own-metrics"
		}
		return ""
	})
	if len(un) != 4 || !strings.Contains(md, "| `kipvs_services_not_programmed` | only-kipvs | gauge | `own-metrics` |") {
		t.Errorf("unexplained %d:\n%s", len(un), md)
	}
}

func TestSyncFigures(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, MetricsFile)
	exposition := `# TYPE kubeproxy_sync_proxy_rules_duration_seconds histogram
kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv4",le="16.384"} 1
kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv4",le="+Inf"} 5
kubeproxy_sync_proxy_rules_duration_seconds_sum{ip_family="IPv4"} 200.2966949
kubeproxy_sync_proxy_rules_duration_seconds_count{ip_family="IPv4"} 5
kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv6",le="+Inf"} 3
kubeproxy_sync_proxy_rules_duration_seconds_sum{ip_family="IPv6"} 146.65635508
kubeproxy_sync_proxy_rules_duration_seconds_count{ip_family="IPv6"} 3
# TYPE kubeproxy_network_programming_duration_seconds histogram
kubeproxy_network_programming_duration_seconds_bucket{ip_family="IPv4",le="1"} 2
kubeproxy_network_programming_duration_seconds_bucket{ip_family="IPv4",le="30"} 7
kubeproxy_network_programming_duration_seconds_bucket{ip_family="IPv4",le="+Inf"} 10
kubeproxy_network_programming_duration_seconds_sum{ip_family="IPv4"} 684.53952894
kubeproxy_network_programming_duration_seconds_count{ip_family="IPv4"} 10
`
	if err := os.WriteFile(path, []byte(exposition), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ReadSyncFigures(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []SyncFigure{
		{Family: "IPv4", Syncs: 5, SyncTotal: seconds(200.2966949), Programmed: 10, ProgrammingTotal: seconds(684.53952894), ProgrammingOver30: 3, Has30: true},
		{Family: "IPv6", Syncs: 3, SyncTotal: seconds(146.65635508)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("sync figures:\n got %+v\nwant %+v", got, want)
	}
	kv, err := ReadJUnit("testdata/junit_kipvs.xml")
	if err != nil {
		t.Fatal(err)
	}
	out, _ := Render(map[string]*Result{"kube-proxy": {Run: Run{Proxy: "kube-proxy"}, Report: kv, Syncs: got}}, nil, "")
	for _, s := range []string{
		"| kube-proxy | 1 | IPv4 | 5 | 3m20.3s | 40.1s | 10 | 1m8.5s | 3 |",
		"| kube-proxy | 1 | IPv6 | 3 | 2m26.7s | 48.9s | 0 | - | - |",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("rendering lacks %q:\n%s", s, out)
		}
	}
}

// A two-node run next to the one-node runs: both are read from the results root, a test that
// skipped on one node and ran on two shows the two-node outcome (marked so), a test only the
// one-node run ran keeps its outcome, and each run has its own row.
func TestReadResultsMergesRuns(t *testing.T) {
	root := t.TempDir()
	junit, err := os.ReadFile("testdata/junit_kipvs.xml")
	if err != nil {
		t.Fatal(err)
	}
	const skipped2 = "[sig-network] Services should preserve source pod IP for traffic thru service cluster IP [LinuxOnly]"
	two := strings.Replace(string(junit), `status="skipped" time="0.1">
      <skipped message="skipped - requires at least 2 nodes"></skipped>`, `status="failed" time="33.0">
      <failure message="source IP 10.244.0.1, want the pod's" type="failed">[FAILED]</failure>`, 1)
	if two == string(junit) {
		t.Fatal("testdata changed: no skipped two-node test to turn into a failure")
	}
	write := func(dir string, run Run, report string) {
		t.Helper()
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		run.JUnit = "junit_suite_01.xml"
		if err := os.WriteFile(filepath.Join(dir, run.JUnit), []byte(report), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := WriteRun(dir, &run); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Date(2026, 11, 27, 15, 0, 0, 0, time.UTC)
	write(filepath.Join(root, "kipvs"), Run{Proxy: "kipvs", Started: t0, Commit: "one"}, string(junit))
	write(filepath.Join(root, "2-nodes", "kipvs"), Run{Proxy: "kipvs", Started: t0.Add(time.Hour), Commit: "two", Nodes: 2}, two)
	runs, err := ReadResults(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || runs[0].Set != "" || runs[1].Set != "2-nodes" {
		t.Fatalf("runs %+v", runs)
	}
	res := Merge(runs)
	out, _ := Render(res, nil, "")
	for _, s := range []string{
		"| " + skipped2 + " | not run | **FAIL** 33s (2 nodes) |",
		"| [sig-network] Services should serve a basic endpoint from pods [Conformance] | not run | pass 40s (2 nodes) |",
		"| kipvs | 1 | 2026-11-27 15:00 | one | 3 | 2 | 1 | 1 |",
		"| kipvs | 2 | 2026-11-27 16:00 | two | 4 | 2 | 2 | 0 |",
		"kipvs run on 2 nodes, 2026-11-27 16:00",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("rendering lacks %q:\n%s", s, out)
		}
	}
	// The later run did not run a test the earlier one ran: the earlier outcome stays.
	only1 := strings.Replace(two, `status="passed" time="40.2"></testcase>`, `status="skipped" time="0"><skipped message="skipped - it needs something"></skipped></testcase>`, 1)
	write(filepath.Join(root, "2-nodes", "kipvs"), Run{Proxy: "kipvs", Started: t0.Add(time.Hour), Commit: "two", Nodes: 2}, only1)
	runs, err = ReadResults(root)
	if err != nil {
		t.Fatal(err)
	}
	out, _ = Render(Merge(runs), nil, "")
	if s := "| [sig-network] Services should serve a basic endpoint from pods [Conformance] | not run | pass 40s |"; !strings.Contains(out, s) {
		t.Errorf("rendering lacks %q (the one-node outcome):\n%s", s, out)
	}
}

// A run stopped by an interrupt (SIGINT to ginkgo) has no result for the test it stopped,
// nor for those it never reached (ginkgo marks those skipped like unselected ones): both are
// left out, not counted as failures; what finished before stays.
func TestParseJUnitInterrupted(t *testing.T) {
	rep, err := ParseJUnit([]byte(`<testsuites><testsuite name="Kubernetes e2e suite" time="900">
<testcase name="[It] [sig-network] A passed" status="passed" time="400"></testcase>
<testcase name="[It] [sig-network] B stopped" status="interrupted" time="500"><error message="Interrupted by User" type="interrupted">x</error></testcase>
<testcase name="[It] [sig-network] C never reached" status="skipped" time="0"><skipped message="skipped"></skipped></testcase>
</testsuite></testsuites>`))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Cases) != 1 || rep.Cases["[sig-network] A passed"].Status != Passed {
		t.Errorf("cases %v, want only A, passed", rep.Cases)
	}
}
