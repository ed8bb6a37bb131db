package conformance

import (
	"encoding/xml"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"
)

// Status is one test's outcome in one run.
type Status string

// The outcomes a JUnit testcase can have.
const (
	Passed  Status = "passed"
	Failed  Status = "failed"
	Skipped Status = "skipped" // the test skipped itself (e.g. it needs two nodes)
	Setup   Status = "setup"   // one of ginkgo's suite nodes ([SynchronizedBeforeSuite], ...), passed
	Absent  Status = ""        // not in that run's report
)

// notSelected is the skip message ginkgo's JUnit gives every spec the focus and skip left out.
const notSelected = "skipped"

// Case is one testcase of a report.
type Case struct {
	Name    string
	Status  Status
	Time    time.Duration
	Message string // the failure's message, or the skip's
}

// Report is one run's JUnit report, by test name.
type Report struct {
	Cases map[string]Case
	Time  time.Duration // the suite's, as JUnit states it
}

type junitSuites struct {
	Suites []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Time  float64     `xml:"time,attr"`
	Cases []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name    string    `xml:"name,attr"`
	Status  string    `xml:"status,attr"`
	Time    float64   `xml:"time,attr"`
	Skipped *junitMsg `xml:"skipped"`
	Failure *junitMsg `xml:"failure"`
	Error   *junitMsg `xml:"error"`
}

type junitMsg struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

// ReadJUnit reads a JUnit file as ginkgo v2 writes it (testsuites > testsuite > testcase).
func ReadJUnit(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseJUnit(b)
}

// ParseJUnit parses a JUnit document. Ginkgo's own setup nodes ([SynchronizedBeforeSuite],
// [ReportAfterSuite], ...) are kept under their names: a failed BeforeSuite fails the run.
func ParseJUnit(b []byte) (*Report, error) {
	var doc junitSuites
	if err := xml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("junit: %w", err)
	}
	if len(doc.Suites) == 0 {
		var one junitSuite
		if err := xml.Unmarshal(b, &one); err != nil || len(one.Cases) == 0 {
			return nil, fmt.Errorf("junit: no testsuite")
		}
		doc.Suites = []junitSuite{one}
	}
	rep := &Report{Cases: map[string]Case{}}
	for _, s := range doc.Suites {
		rep.Time += seconds(s.Time)
		for _, c := range s.Cases {
			if c.Skipped != nil && c.Skipped.Message == notSelected {
				continue // not in the selection, or not reached before the run was interrupted
			}
			if c.Status == "interrupted" {
				continue // stopped by an interrupt of the run: not a result
			}
			k := Case{Name: CleanName(c.Name), Time: seconds(c.Time), Status: Passed}
			switch {
			case c.Failure != nil:
				k.Status, k.Message = Failed, firstLine(c.Failure.Message, c.Failure.Text)
			case c.Error != nil:
				k.Status, k.Message = Failed, firstLine(c.Error.Message, c.Error.Text)
			case c.Skipped != nil || c.Status == "skipped" || c.Status == "pending":
				k.Status, k.Message = Skipped, strings.TrimPrefix(firstLine(c.Skipped.msg(), ""), "skipped - ")
			case c.Status == "failed" || c.Status == "panicked" || c.Status == "interrupted" || c.Status == "timedout" || c.Status == "aborted":
				k.Status = Failed
			case suiteNode(k.Name):
				k.Status = Setup
			}
			if old, ok := rep.Cases[k.Name]; ok && old.Status == Failed {
				continue // a flake attempt that failed stays failed
			}
			rep.Cases[k.Name] = k
		}
	}
	return rep, nil
}

// suiteNode reports whether a testcase is one of ginkgo's suite-level nodes rather than a test.
func suiteNode(name string) bool {
	for _, p := range []string{"[BeforeSuite]", "[AfterSuite]", "[SynchronizedBeforeSuite]", "[SynchronizedAfterSuite]",
		"[ReportBeforeSuite]", "[ReportAfterSuite]", "[DeferCleanup (Suite)]"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

func (m *junitMsg) msg() string {
	if m == nil {
		return ""
	}
	return m.Message
}

func seconds(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }

// CleanName drops ginkgo's "[It] " prefix and collapses the double spaces the suite puts
// before its tags, so names read as the suite lists them.
func CleanName(n string) string {
	n = strings.TrimPrefix(strings.TrimSpace(n), "[It] ")
	return strings.Join(strings.Fields(n), " ")
}

func firstLine(a, b string) string {
	s := strings.TrimSpace(a)
	if s == "" {
		s = strings.TrimSpace(b)
	}
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// Ran reports whether the test ran (passed or failed) in the report.
func (r *Report) Ran(name string) bool {
	c, ok := r.Cases[name]
	return ok && (c.Status == Passed || c.Status == Failed)
}

// Count returns how many cases have status s.
func (r *Report) Count(s Status) int {
	n := 0
	for _, c := range r.Cases {
		if c.Status == s {
			n++
		}
	}
	return n
}

// Names returns every case name, sorted.
func (r *Report) Names() []string {
	out := make([]string, 0, len(r.Cases))
	for n := range r.Cases {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
