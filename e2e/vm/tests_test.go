package vm

import (
	"strings"
	"testing"
)

// The CI log's tail is all a reader may see of a failed run: each failure carries the test's
// own log lines, without the daemon log it dumped after the error, and not other tests' lines.
func TestCountResults(t *testing.T) {
	out := strings.Join([]string{
		"=== RUN   TestA",
		"    a_test.go:10: step one",
		"--- PASS: TestA (1.00s)",
		"=== RUN   TestB",
		"    b_test.go:20: answers from map[x:1 y:1], want every one from a single backend",
		"    scenario_test.go:79: kipvs log:",
		"        line 1",
		"        line 2",
		"        line 3",
		"        line 4",
		"        line 5",
		"        line 6",
		"2026-11-27T18:03:28Z INFO not a test line",
		"=== RUN   TestB/sub",
		"        b_test.go:30: in a subtest",
		"--- FAIL: TestB (2.00s)",
		"    --- FAIL: TestB/sub (0.50s)",
		"=== RUN   TestC",
		"--- PASS: TestC (0.10s)",
	}, "\n")
	passed, failed, failures := countResults(out)
	if passed != 2 || failed != 1 {
		t.Fatalf("passed %d failed %d, want 2 and 1", passed, failed)
	}
	want := strings.Join([]string{
		"--- FAIL: TestB (2.00s)",
		"    b_test.go:20: answers from map[x:1 y:1], want every one from a single backend",
		"    scenario_test.go:79: kipvs log:",
		"        line 1",
		"        line 2",
		"        line 3",
		"        line 4",
		"        ...",
		"        b_test.go:30: in a subtest",
	}, "\n")
	if len(failures) != 1 || failures[0] != want {
		t.Errorf("failures:\n%s\nwant:\n%s", strings.Join(failures, "\n--\n"), want)
	}

	var long []string
	long = append(long, "=== RUN   TestD")
	for range failureContext + 5 {
		long = append(long, "    d_test.go:1: x")
	}
	long = append(long, "--- FAIL: TestD (1.00s)")
	_, _, failures = countResults(strings.Join(long, "\n"))
	if got := strings.Count(failures[0], "\n"); got != failureContext+1 {
		t.Errorf("a long failure has %d lines after its FAIL line, want %d (the last %d and a note):\n%s", got, failureContext+1, failureContext, failures[0])
	}
	if !strings.Contains(failures[0], "(5 earlier lines in the log above)") {
		t.Errorf("no note of the lines left out:\n%s", failures[0])
	}
}
