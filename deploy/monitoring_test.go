package deploy_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// runbookBase is where every alert's runbook_url points, followed by #<alert in lower case>.
const runbookBase = "https://github.com/kipvs/kipvs/blob/main/docs/troubleshooting.md#"

// scrapeFile is a real kipvs /metrics, the source of the promtool tests' input series
// (monitoring/README.md says how it was captured).
var scrapeFile = filepath.Join("monitoring", "testdata", "scrape.txt")

// targetLabels are the labels Prometheus adds to a scraped series (the target's and the
// monitors' relabelings), which a scrape itself never holds.
var scrapeTargetLabels = []string{"job", "instance", "node", "namespace", "pod", "service", "container", "endpoint"}

// The files derived from others, and how: monitoring/prometheusrule.yaml wraps
// monitoring/kipvs.rules.yaml; monitoring/grafana-dashboard.yaml wraps grafana/kipvs.json;
// the chart carries copies of both sources (a chart cannot read files outside itself).
// KIPVS_UPDATE_MONITORING=1 go test -run TestMonitoringFilesInStep ./deploy rewrites them.
func derivedMonitoringFiles(t *testing.T) map[string][]byte {
	t.Helper()
	rules, err := os.ReadFile(filepath.Join("monitoring", "kipvs.rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dash, err := os.ReadFile(filepath.Join("grafana", "kipvs.json"))
	if err != nil {
		t.Fatal(err)
	}
	var pr bytes.Buffer
	pr.WriteString(`# Generated from kipvs.rules.yaml (KIPVS_UPDATE_MONITORING=1 go test -run TestMonitoringFilesInStep ./deploy):
# the same rules as a Prometheus Operator PrometheusRule.
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: kipvs
  namespace: kube-system
  labels:
    app.kubernetes.io/name: kipvs
spec:
`)
	for _, l := range strings.SplitAfter(string(rules), "\n") {
		if strings.TrimSpace(l) != "" {
			pr.WriteString("  ")
		}
		pr.WriteString(l)
	}
	var cm bytes.Buffer
	cm.WriteString(`# Generated from ../grafana/kipvs.json (KIPVS_UPDATE_MONITORING=1 go test -run TestMonitoringFilesInStep ./deploy):
# the dashboard for Grafana's dashboard sidecar, which loads ConfigMaps labelled
# grafana_dashboard: "1" (from the namespaces it searches).
apiVersion: v1
kind: ConfigMap
metadata:
  name: kipvs-dashboard
  namespace: kube-system
  labels:
    app.kubernetes.io/name: kipvs
    grafana_dashboard: "1"
data:
  kipvs.json: |-
`)
	for _, l := range strings.SplitAfter(strings.TrimRight(string(dash), "\n"), "\n") {
		cm.WriteString("    " + l)
	}
	cm.WriteString("\n")
	return map[string][]byte{
		filepath.Join("monitoring", "prometheusrule.yaml"):    pr.Bytes(),
		filepath.Join("monitoring", "grafana-dashboard.yaml"): cm.Bytes(),
		filepath.Join(chartDir, "files", "kipvs.rules.yaml"):  rules,
		filepath.Join(chartDir, "files", "kipvs.json"):        dash,
	}
}

// TestMonitoringFilesInStep: the PrometheusRule, the dashboard ConfigMap and the chart's
// copies hold exactly the rule file and the dashboard they derive from.
func TestMonitoringFilesInStep(t *testing.T) {
	update := os.Getenv("KIPVS_UPDATE_MONITORING") == "1"
	for path, want := range derivedMonitoringFiles(t) {
		got, err := os.ReadFile(path)
		if err == nil && bytes.Equal(got, want) {
			continue
		}
		if update {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("wrote %s", path)
			continue
		}
		why := "differs from what its source gives"
		if err != nil {
			why = err.Error()
		}
		t.Errorf("%s is not in step with its source (%s): KIPVS_UPDATE_MONITORING=1 go test -run TestMonitoringFilesInStep ./deploy", path, why)
	}
	// The wrappers decode to what they wrap.
	var pr struct {
		Spec any `json:"spec"`
	}
	if err := yaml.Unmarshal(mustRead(t, filepath.Join("monitoring", "prometheusrule.yaml")), &pr); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(readYAML(t, filepath.Join("monitoring", "kipvs.rules.yaml")), pr.Spec); d != "" {
		t.Errorf("prometheusrule.yaml's spec is not kipvs.rules.yaml (-rules +spec):\n%s", d)
	}
	var cm struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(mustRead(t, filepath.Join("monitoring", "grafana-dashboard.yaml")), &cm); err != nil {
		t.Fatal(err)
	}
	if cm.Metadata.Labels["grafana_dashboard"] != "1" || cm.Data["kipvs.json"] != strings.TrimRight(string(mustRead(t, filepath.Join("grafana", "kipvs.json"))), "\n") {
		t.Errorf("grafana-dashboard.yaml: labels %v, kipvs.json equal to grafana/kipvs.json: %v", cm.Metadata.Labels,
			cm.Data["kipvs.json"] == strings.TrimRight(string(mustRead(t, filepath.Join("grafana", "kipvs.json"))), "\n"))
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ruleFile is the part of a Prometheus rule file these tests read.
type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			For         string            `json:"for"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

// ruleTests is the part of a promtool test file these tests read.
type ruleTests struct {
	RuleFiles []string `json:"rule_files"`
	Tests     []struct {
		Name        string `json:"name"`
		InputSeries []struct {
			Series string `json:"series"`
		} `json:"input_series"`
		AlertRuleTests []struct {
			Alertname string `json:"alertname"`
			ExpAlerts []any  `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

// readScrape parses the captured /metrics into sample label sets: name -> label sets
// (each as sorted "k=v" pairs, for a histogram or summary under the family's name).
func readScrape(t *testing.T) map[string][]string {
	t.Helper()
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(bytes.NewReader(mustRead(t, scrapeFile)))
	if err != nil {
		t.Fatalf("%s: %v", scrapeFile, err)
	}
	out := map[string][]string{}
	for name, f := range fams {
		for _, m := range f.Metric {
			out[name] = append(out[name], labelKey(m.Label))
		}
	}
	return out
}

func labelKey(ls []*dto.LabelPair) string {
	var kv []string
	for _, l := range ls {
		kv = append(kv, l.GetName()+"="+l.GetValue())
	}
	slices.Sort(kv)
	return strings.Join(kv, ",")
}

// parseSeries reads a promtool input series selector: name{k="v",...}.
func parseSeries(s string) (name string, labels []*dto.LabelPair, err error) {
	name, rest, ok := strings.Cut(s, "{")
	if !ok {
		return strings.TrimSpace(s), nil, nil
	}
	body, ok := strings.CutSuffix(strings.TrimSpace(rest), "}")
	if !ok {
		return "", nil, fmt.Errorf("series %q: no closing }", s)
	}
	for _, pair := range strings.Split(body, ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "=")
		if !ok || len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
			return "", nil, fmt.Errorf("series %q: label %q is not k=\"v\"", s, pair)
		}
		k, v = strings.TrimSpace(k), v[1:len(v)-1]
		labels = append(labels, &dto.LabelPair{Name: &k, Value: &v})
	}
	return strings.TrimSpace(name), labels, nil
}

// TestMonitoringRules checks kipvs.rules.yaml against kipvs itself: every metric and label a
// rule uses is one kipvs registers (the dashboard's check), and appears in the real scrape;
// every alert has a severity, a summary and its runbook in docs/troubleshooting.md; every
// alert is tested by kipvs.rules.test.yaml with an alert expected to fire; and every input
// series of those tests is a series of the real scrape (less the labels Prometheus adds).
func TestMonitoringRules(t *testing.T) {
	known := exportedMetrics(t)
	scrape := readScrape(t)
	var rf ruleFile
	if err := yaml.UnmarshalStrict(mustRead(t, filepath.Join("monitoring", "kipvs.rules.yaml")), &rf); err != nil {
		t.Fatal(err)
	}
	var alerts []string
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				t.Errorf("group %s: a rule without an alert name (expr %q)", g.Name, r.Expr)
				continue
			}
			alerts = append(alerts, r.Alert)
			problems, families := checkExpr(strings.TrimSpace(r.Expr), known)
			for _, p := range problems {
				t.Errorf("%s: %s", r.Alert, p)
			}
			for _, f := range families {
				if _, ok := scrape[f]; !ok {
					t.Errorf("%s uses %s, which the real scrape %s does not hold", r.Alert, f, scrapeFile)
				}
			}
			if want := runbookBase + strings.ToLower(r.Alert); r.Annotations["runbook_url"] != want {
				t.Errorf("%s: runbook_url %q, want %q", r.Alert, r.Annotations["runbook_url"], want)
			}
			if s := r.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("%s: severity %q, want warning or critical", r.Alert, s)
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: no summary or description", r.Alert)
			}
		}
	}
	if len(alerts) < 6 {
		t.Fatalf("only %d alerts read from kipvs.rules.yaml", len(alerts))
	}
	runbooks := string(mustRead(t, filepath.Join("..", "docs", "troubleshooting.md")))
	for _, a := range alerts {
		if !strings.Contains(runbooks, "\n### "+a+"\n") {
			t.Errorf("docs/troubleshooting.md has no section \"### %s\", the anchor of its runbook_url", a)
		}
	}

	var rt ruleTests
	if err := yaml.Unmarshal(mustRead(t, filepath.Join("monitoring", "kipvs.rules.test.yaml")), &rt); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rt.RuleFiles, []string{"kipvs.rules.yaml"}) {
		t.Errorf("kipvs.rules.test.yaml tests %v, want [kipvs.rules.yaml]", rt.RuleFiles)
	}
	fires := map[string]bool{}
	for _, tc := range rt.Tests {
		for _, a := range tc.AlertRuleTests {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			}
		}
		for _, in := range tc.InputSeries {
			name, labels, err := parseSeries(in.Series)
			if err != nil {
				t.Errorf("test %q: %v", tc.Name, err)
				continue
			}
			labels = slices.DeleteFunc(labels, func(l *dto.LabelPair) bool { return slices.Contains(scrapeTargetLabels, l.GetName()) })
			if !slices.Contains(scrape[name], labelKey(labels)) {
				t.Errorf("test %q: input series %s is not a series of the real scrape (its %s series: %q)", tc.Name, in.Series, name, scrape[name])
			}
		}
	}
	for _, a := range alerts {
		if !fires[a] {
			t.Errorf("alert %s is never expected to fire in kipvs.rules.test.yaml", a)
		}
	}
}

// TestMonitoringMonitorsSelectKipvs: the ServiceMonitor selects monitoring/service.yaml,
// which selects the DaemonSet's pods on kipvs's metrics port; the PodMonitor selects the
// same pods on the same port; both look in the DaemonSet's namespace; the kustomization
// applies everything but the PodMonitor (the ServiceMonitor's alternative).
func TestMonitoringMonitorsSelectKipvs(t *testing.T) {
	b := loadBase(t)
	podLabels := b.ds.Spec.Template.Labels
	var svc corev1.Service
	decodeStrict(t, filepath.Join("monitoring", "service.yaml"), &svc)
	for k, v := range svc.Spec.Selector {
		if podLabels[k] != v {
			t.Errorf("service.yaml selects %s=%s, the pods have %s=%q", k, v, k, podLabels[k])
		}
	}
	metricsPort := int32(10249)
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != metricsPort || svc.Spec.Ports[0].TargetPort != intstr.FromInt32(metricsPort) ||
		svc.Spec.Ports[0].Name != "metrics" || svc.Spec.ClusterIP != "None" || svc.Namespace != b.ds.Namespace {
		t.Errorf("service.yaml %s/%s %+v: want headless, port metrics %d, in %s", svc.Namespace, svc.Name, svc.Spec, metricsPort, b.ds.Namespace)
	}
	type monitor struct {
		Spec struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			NamespaceSelector struct {
				MatchNames []string `json:"matchNames"`
			} `json:"namespaceSelector"`
			Endpoints []struct {
				Port       string `json:"port"`
				TargetPort int32  `json:"targetPort"`
			} `json:"endpoints"`
			PodMetricsEndpoints []struct {
				TargetPort int32 `json:"targetPort"`
			} `json:"podMetricsEndpoints"`
		} `json:"spec"`
	}
	var sm, pm monitor
	if err := yaml.Unmarshal(mustRead(t, filepath.Join("monitoring", "servicemonitor.yaml")), &sm); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(mustRead(t, filepath.Join("monitoring", "podmonitor.yaml")), &pm); err != nil {
		t.Fatal(err)
	}
	for k, v := range sm.Spec.Selector.MatchLabels {
		if svc.Labels[k] != v {
			t.Errorf("servicemonitor.yaml selects %s=%s, service.yaml has %s=%q", k, v, k, svc.Labels[k])
		}
	}
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != svc.Spec.Ports[0].Name {
		t.Errorf("servicemonitor.yaml endpoints %+v, want the Service's port %q", sm.Spec.Endpoints, svc.Spec.Ports[0].Name)
	}
	for k, v := range pm.Spec.Selector.MatchLabels {
		if podLabels[k] != v {
			t.Errorf("podmonitor.yaml selects %s=%s, the pods have %s=%q", k, v, k, podLabels[k])
		}
	}
	if len(pm.Spec.PodMetricsEndpoints) != 1 || pm.Spec.PodMetricsEndpoints[0].TargetPort != metricsPort {
		t.Errorf("podmonitor.yaml endpoints %+v, want port %d", pm.Spec.PodMetricsEndpoints, metricsPort)
	}
	for name, m := range map[string]monitor{"servicemonitor.yaml": sm, "podmonitor.yaml": pm} {
		if !slices.Equal(m.Spec.NamespaceSelector.MatchNames, []string{b.ds.Namespace}) {
			t.Errorf("%s looks in %v, the DaemonSet is in %s", name, m.Spec.NamespaceSelector.MatchNames, b.ds.Namespace)
		}
	}
	// The metrics port is the one kipvs's ConfigMap serves /metrics on.
	if !strings.Contains(b.cm.Data["config.conf"], fmt.Sprintf("metricsBindAddress: 127.0.0.1:%d\n", metricsPort)) {
		t.Errorf("base/configmap.yaml's metricsBindAddress is not on port %d", metricsPort)
	}

	var k kustomization
	decodeStrict(t, filepath.Join("monitoring", "kustomization.yaml"), &k)
	want := []string{"grafana-dashboard.yaml", "prometheusrule.yaml", "service.yaml", "servicemonitor.yaml"}
	got := slices.Sorted(slices.Values(k.Resources))
	if !slices.Equal(got, want) {
		t.Errorf("monitoring/kustomization.yaml resources %v, want %v", got, want)
	}
}
