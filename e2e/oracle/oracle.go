package oracle

import (
	_ "embed"
	"fmt"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"
)

//go:embed differences.yaml
var differencesYAML []byte

// Side names the proxy a dump line or a configuration value comes from.
type Side string

const (
	KubeProxy Side = "kube-proxy"
	Kipvs     Side = "kipvs"
)

// Difference is one deliberate difference between kipvs and kube-proxy.
type Difference struct {
	// ID names the entry in test output.
	ID string `json:"id"`
	// Area is what the difference is about, as an operator would look it up.
	Area string `json:"area"`
	// KubeProxy and Kipvs say what each does.
	KubeProxy string `json:"kubeProxy"`
	Kipvs     string `json:"kipvs"`
	// Why is the reason kipvs differs.
	Why string `json:"why"`
	// Kernel lists the lines of the differential kernel dump this difference explains.
	Kernel []KernelMatch `json:"kernel,omitempty"`
	// Config lists the findings of the config and flag differential it explains.
	Config []ConfigMatch `json:"config,omitempty"`
	// Metrics lists the differences of the /metrics comparison on the real node
	// (e2e/conformance) it explains.
	Metrics []MetricMatch `json:"metrics,omitempty"`
	// Intermittent marks a difference that shows only in some runs (kube-proxy losing a
	// race): the differential does not require its kernel lines to appear.
	Intermittent bool `json:"intermittent,omitempty"`
}

// KernelMatch explains a dump line found on one side only.
type KernelMatch struct {
	// Section is the dump section: ipvs, ipset, iptables, ip6tables, dummy, sysctl.
	Section string `json:"section"`
	// Side is the proxy whose dump has the line (the other's does not).
	Side Side `json:"side"`
	// Line is a regular expression the whole line matches.
	Line string `json:"line"`
	// Cases limits the match to these corpus cases (empty: any).
	Cases []string `json:"cases,omitempty"`

	re *regexp.Regexp
}

// ConfigMatch explains one finding of the config and flag differential.
type ConfigMatch struct {
	// Case is the name of the table row.
	Case string `json:"case"`
	// Field is the configuration field path that differs ("" for the accept or reject
	// decision).
	Field string `json:"field,omitempty"`
}

// MetricMatch explains one finding of the /metrics comparison (e2e/conformance).
type MetricMatch struct {
	// Family is a regular expression the whole metric family name matches.
	Family string `json:"family"`
	// Kind is the finding: only-kube-proxy, only-kipvs (the family is exported by that
	// side only), labels (label names differ), values (a label's values differ), type, or
	// observed (one side has observed or counted something, the other nothing).
	Kind string `json:"kind"`

	re *regexp.Regexp
}

// MetricKinds are the findings a MetricMatch may explain.
var MetricKinds = []string{"only-kube-proxy", "only-kipvs", "labels", "values", "type", "observed"}

// Differences is the whole data file.
type Differences []*Difference

// Load parses the embedded differences.yaml.
func Load() (Differences, error) {
	return Parse(differencesYAML)
}

// Parse parses and checks a differences file.
func Parse(data []byte) (Differences, error) {
	var ds Differences
	if err := yaml.UnmarshalStrict(data, &ds); err != nil {
		return nil, fmt.Errorf("differences.yaml: %w", err)
	}
	seen := map[string]bool{}
	for i, d := range ds {
		if d.ID == "" || d.Area == "" || d.KubeProxy == "" || d.Kipvs == "" || d.Why == "" {
			return nil, fmt.Errorf("differences.yaml: entry %d (%q): id, area, kubeProxy, kipvs and why are all required", i, d.ID)
		}
		if seen[d.ID] {
			return nil, fmt.Errorf("differences.yaml: duplicate id %q", d.ID)
		}
		seen[d.ID] = true
		for j := range d.Kernel {
			m := &d.Kernel[j]
			switch m.Section {
			case "ipvs", "ipset", "iptables", "ip6tables", "dummy", "sysctl", "ipvs-timeouts":
			default:
				return nil, fmt.Errorf("differences.yaml: %s: unknown section %q", d.ID, m.Section)
			}
			if m.Side != KubeProxy && m.Side != Kipvs {
				return nil, fmt.Errorf("differences.yaml: %s: side %q is neither %q nor %q", d.ID, m.Side, KubeProxy, Kipvs)
			}
			re, err := regexp.Compile("^(?:" + m.Line + ")$")
			if err != nil {
				return nil, fmt.Errorf("differences.yaml: %s: line: %w", d.ID, err)
			}
			m.re = re
		}
		for j := range d.Metrics {
			m := &d.Metrics[j]
			if !contains(MetricKinds, m.Kind) {
				return nil, fmt.Errorf("differences.yaml: %s: metric kind %q: want one of %v", d.ID, m.Kind, MetricKinds)
			}
			re, err := regexp.Compile("^(?:" + m.Family + ")$")
			if err != nil {
				return nil, fmt.Errorf("differences.yaml: %s: family: %w", d.ID, err)
			}
			m.re = re
		}
		for _, c := range d.Config {
			if c.Case == "" {
				return nil, fmt.Errorf("differences.yaml: %s: a config match needs a case", d.ID)
			}
		}
	}
	return ds, nil
}

// ExplainKernel returns the difference that explains line, found in section of side's dump
// of corpus case c only, or nil.
func (ds Differences) ExplainKernel(c, section string, side Side, line string) *Difference {
	for _, d := range ds {
		for _, m := range d.Kernel {
			if m.Section != section || m.Side != side || !m.re.MatchString(line) {
				continue
			}
			if len(m.Cases) > 0 && !contains(m.Cases, c) {
				continue
			}
			return d
		}
	}
	return nil
}

// ExplainMetric returns the difference that explains a finding of kind about family in the
// /metrics comparison, or nil.
func (ds Differences) ExplainMetric(family, kind string) *Difference {
	for _, d := range ds {
		for _, m := range d.Metrics {
			if m.Kind == kind && m.re.MatchString(family) {
				return d
			}
		}
	}
	return nil
}

// ExplainConfig returns the difference that explains field differing (or, with field "",
// the accept or reject decision) in config differential case c, or nil.
func (ds Differences) ExplainConfig(c, field string) *Difference {
	for _, d := range ds {
		for _, m := range d.Config {
			if m.Case == c && m.Field == field {
				return d
			}
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Render is docs/differences-from-kube-proxy.md.
func (ds Differences) Render() string {
	var b strings.Builder
	b.WriteString(`# Deliberate differences from kube-proxy v1.34 (IPVS mode)

<!-- Generated from e2e/oracle/differences.yaml by go run ./e2e/oracle/cmd/render-differences.
     Edit the data file, not this page; a unit test fails when they disagree. -->

kipvs keeps kube-proxy's flags, configuration file, kernel object names and metric names, so a
node can switch in either direction. Where it behaves differently on purpose, it is listed
here with the reason.

This list is the data file of kipvs's differential tests against the real kube-proxy v1.34.10
binary (built from the nested module ` + "`e2e/k8s`" + `), which run in ` + "`make test`" + `:

- **kernel**: for each case of a corpus of Services, EndpointSlices, Nodes and configurations,
  kube-proxy ` + "`--proxy-mode=ipvs`" + ` and then kipvs program the same objects in the test VM;
  the IPVS table, the ` + "`KUBE-*`" + ` ipsets, the ` + "`KUBE-*`" + ` iptables and ip6tables rules,
  the addresses on ` + "`kube-ipvs0`" + ` and the sysctls are dumped and compared
  (` + "`TestDifferentialKubeProxy`" + `). A line found on one side only fails the test unless an
  entry below explains it (the "kernel lines" column).
- **config**: both binaries' ` + "`--write-config-to`" + ` over a table of configuration files and
  command lines; the accept or reject decision and every field of the configurations written
  are compared (` + "`e2e/configdiff`" + `, the "config cases" column).

An entry with neither column is behaviour the two differentials cannot see (a server, a
metric, a log, or input on which kube-proxy fails); other tests cover those.

| area | kube-proxy v1.34 (IPVS) | kipvs | why | kernel lines | config cases |
|---|---|---|---|---|---|
`)
	for _, d := range ds {
		var kernel, config []string
		for _, m := range d.Kernel {
			s := fmt.Sprintf("%s, %s only: `%s`", m.Section, m.Side, m.Line)
			if len(m.Cases) > 0 {
				s += " (" + strings.Join(m.Cases, ", ") + ")"
			}
			kernel = append(kernel, s)
		}
		for _, m := range d.Config {
			s := "`" + m.Case + "`"
			if m.Field != "" {
				s += ": " + m.Field
			} else {
				s += ": accept/reject"
			}
			config = append(config, s)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", cell(d.Area), cell(d.KubeProxy), cell(d.Kipvs), cell(d.Why),
			cell(strings.Join(kernel, "<br>")), cell(strings.Join(config, "<br>")))
	}
	return b.String()
}

// cell makes s fit a Markdown table cell.
func cell(s string) string {
	s = strings.TrimSpace(s)
	s = strings.ReplaceAll(s, "\n", " ")
	s = strings.ReplaceAll(s, "|", `\|`)
	return s
}
