package deploy_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kipvs/kipvs/internal/metrics"
	"github.com/kipvs/kipvs/internal/svcstats"
)

// metricInfo is what the dashboard test knows of one exported metric family.
type metricInfo struct {
	labels    []string
	histogram bool
	summary   bool
}

// descRecorder is a prometheus.Registerer that records what kipvs registers: every
// collector's descriptors, with their label names, and whether it is a histogram or summary
// (whose series carry the _bucket, _sum and _count suffixes).
type descRecorder struct {
	metrics map[string]metricInfo
	err     error
}

var (
	fqNameRE = regexp.MustCompile(`fqName: "([^"]+)"`)
	labelsRE = regexp.MustCompile(`variableLabels: \{([^}]*)\}`)
)

func (r *descRecorder) Register(c prometheus.Collector) error {
	var info metricInfo
	switch c.(type) {
	case *prometheus.HistogramVec, prometheus.Histogram:
		info.histogram = true
	case *prometheus.SummaryVec, prometheus.Summary:
		info.summary = true
	}
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		s := d.String()
		m := fqNameRE.FindStringSubmatch(s)
		if m == nil {
			r.err = fmt.Errorf("cannot read the name in descriptor %s", s)
			continue
		}
		mi := info
		if l := labelsRE.FindStringSubmatch(s); l != nil && l[1] != "" {
			for _, name := range strings.Split(l[1], ",") {
				name = strings.TrimSuffix(strings.TrimPrefix(name, "c("), ")")
				mi.labels = append(mi.labels, name)
			}
		}
		r.metrics[m[1]] = mi
	}
	return nil
}

func (r *descRecorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = r.Register(c)
	}
}

func (r *descRecorder) Unregister(prometheus.Collector) bool { return false }

// exportedMetrics returns every metric family kipvs's registry exports: what daemon.New
// registers, metrics.New's metrics, client-go's rest_client_* (metrics.NewRESTClient) and the Service traffic collector (whose Describe lists
// the endpoint families too, exported only with --kipvs-endpoint-metrics).
func exportedMetrics(t *testing.T) map[string]metricInfo {
	t.Helper()
	r := &descRecorder{metrics: map[string]metricInfo{}}
	metrics.New(r)
	metrics.NewRESTClient(r)
	r.MustRegister(svcstats.New(svcstats.Options{}))
	if r.err != nil {
		t.Fatal(r.err)
	}
	for _, m := range []string{"kubeproxy_sync_proxy_rules_duration_seconds", "kipvs_service_connections_total", "kipvs_endpoint_bytes_total"} {
		if _, ok := r.metrics[m]; !ok || len(r.metrics) < 30 {
			t.Fatalf("reading kipvs's registrations found only %d metrics, not %s", len(r.metrics), m)
		}
	}
	return r.metrics
}

// promRefs is what a PromQL expression refers to.
type promRefs struct {
	metrics  []string            // series names, as written (with _bucket etc.)
	matchers map[string][]string // series name -> label names in its {...} matchers
	grouping []string            // label names in by(...), without(...), on(...), ignoring(...)
}

var promKeywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true}

// promAggregations may be followed by by/without before their parenthesis.
var promAggregations = map[string]bool{
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true, "count": true,
	"count_values": true, "bottomk": true, "topk": true, "quantile": true, "limitk": true, "limit_ratio": true,
}
var promGrouping = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isIdent(c byte) bool { return isIdentStart(c) || (c >= '0' && c <= '9') }

// scanPromQL extracts the series names and label names of the PromQL subset dashboards use:
// selectors with matchers, functions, aggregations with by/without, binary operators,
// range selectors, numbers and strings. Anything else is an error.
func scanPromQL(expr string) (promRefs, error) {
	refs := promRefs{matchers: map[string][]string{}}
	i := 0
	skipSpace := func() {
		for i < len(expr) && (expr[i] == ' ' || expr[i] == '\n' || expr[i] == '\t') {
			i++
		}
	}
	ident := func() string {
		s := i
		for i < len(expr) && isIdent(expr[i]) {
			i++
		}
		return expr[s:i]
	}
	str := func() error {
		q := expr[i]
		for i++; i < len(expr); i++ {
			switch expr[i] {
			case '\\':
				i++
			case q:
				i++
				return nil
			}
		}
		return fmt.Errorf("unterminated string in %q", expr)
	}
	for i < len(expr) {
		c := expr[i]
		switch {
		case c == '"' || c == '\'':
			if err := str(); err != nil {
				return refs, err
			}
		case c == '[':
			end := strings.IndexByte(expr[i:], ']')
			if end < 0 {
				return refs, fmt.Errorf("unterminated range in %q", expr)
			}
			i += end + 1
		case c == '{':
			return refs, fmt.Errorf("selector without a metric name at %d in %q", i, expr)
		case c >= '0' && c <= '9' || c == '.':
			for i < len(expr) && (isIdent(expr[i]) || expr[i] == '.') {
				i++
			}
		case isIdentStart(c):
			name := ident()
			skipSpace()
			next := byte(0)
			if i < len(expr) {
				next = expr[i]
			}
			switch {
			case promGrouping[name]:
				if next != '(' {
					if name == "group_left" || name == "group_right" {
						continue
					}
					return refs, fmt.Errorf("%s without a label list in %q", name, expr)
				}
				end := strings.IndexByte(expr[i:], ')')
				if end < 0 {
					return refs, fmt.Errorf("unterminated label list in %q", expr)
				}
				for _, l := range strings.Split(expr[i+1:i+end], ",") {
					if l = strings.TrimSpace(l); l != "" {
						refs.grouping = append(refs.grouping, l)
					}
				}
				i += end + 1
			case next == '(' || promKeywords[name] || promAggregations[name]:
				// a function or aggregation, or an operator keyword
			default:
				refs.metrics = append(refs.metrics, name)
				if next != '{' {
					continue
				}
				i++
				for {
					skipSpace()
					if i >= len(expr) {
						return refs, fmt.Errorf("unterminated matchers in %q", expr)
					}
					if expr[i] == '}' {
						i++
						break
					}
					if expr[i] == ',' {
						i++
						continue
					}
					if !isIdentStart(expr[i]) {
						return refs, fmt.Errorf("bad matcher at %d in %q", i, expr)
					}
					refs.matchers[name] = append(refs.matchers[name], ident())
					skipSpace()
					for i < len(expr) && strings.IndexByte("=!~", expr[i]) >= 0 {
						i++
					}
					skipSpace()
					if i >= len(expr) || (expr[i] != '"' && expr[i] != '\'') {
						return refs, fmt.Errorf("matcher without a string value in %q", expr)
					}
					if err := str(); err != nil {
						return refs, err
					}
				}
			}
		default:
			i++
		}
	}
	return refs, nil
}

// targetLabels are added by Prometheus when it scrapes; any series may be matched on them.
var targetLabels = []string{"instance", "job"}

// checkExpr returns the problems of one expression against the exported metrics, and the
// metric families it uses.
func checkExpr(expr string, known map[string]metricInfo) (problems []string, families []string) {
	refs, err := scanPromQL(expr)
	if err != nil {
		return []string{err.Error()}, nil
	}
	if len(refs.metrics) == 0 {
		return []string{fmt.Sprintf("%q refers to no metric", expr)}, nil
	}
	var allLabels []string
	hasBucket := false
	resolve := func(series string) (string, metricInfo, bool) {
		if mi, ok := known[series]; ok && !mi.histogram && !mi.summary {
			return series, mi, true
		}
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			base, ok := strings.CutSuffix(series, suf)
			if !ok {
				continue
			}
			mi, ok := known[base]
			if ok && (mi.histogram || (mi.summary && suf != "_bucket")) {
				return base, mi, true
			}
		}
		return "", metricInfo{}, false
	}
	for _, s := range refs.metrics {
		fam, mi, ok := resolve(s)
		if !ok {
			problems = append(problems, fmt.Sprintf("%q: %s is not a series kipvs exports", expr, s))
			continue
		}
		families = append(families, fam)
		labels := append(slices.Clone(mi.labels), targetLabels...)
		if strings.HasSuffix(s, "_bucket") {
			hasBucket = true
			labels = append(labels, "le")
		}
		for _, l := range refs.matchers[s] {
			if !slices.Contains(labels, l) {
				problems = append(problems, fmt.Sprintf("%q: %s has no label %q (labels %v)", expr, s, l, labels))
			}
		}
		allLabels = append(allLabels, labels...)
	}
	for _, l := range refs.grouping {
		if !slices.Contains(allLabels, l) {
			problems = append(problems, fmt.Sprintf("%q: groups by %q, which none of its series has", expr, l))
		}
	}
	if strings.Contains(expr, "histogram_quantile") && (!hasBucket || !slices.Contains(refs.grouping, "le")) {
		problems = append(problems, fmt.Sprintf("%q: histogram_quantile needs _bucket series aggregated by le", expr))
	}
	return problems, families
}

// TestCheckExprCatchesMistakes shows the dashboard check fails on the mistakes it exists
// for: a metric that does not exist, a wrong suffix, and a label the metric does not have.
func TestCheckExprCatchesMistakes(t *testing.T) {
	known := exportedMetrics(t)
	for _, tc := range []struct {
		expr string
		bad  bool
	}{
		{`sum by (ip_family) (rate(kipvs_sync_full_total{instance=~"$instance"}[$__rate_interval]))`, false},
		{`histogram_quantile(0.99, sum by (le) (rate(kubeproxy_network_programming_duration_seconds_bucket[5m])))`, false},
		{`time() - kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4"}`, false},
		{`rate(kubeproxy_sync_proxy_rules_duration_seconds_count[5m]) / rate(kubeproxy_sync_proxy_rules_duration_seconds_sum[5m])`, false},
		{`rate(kubeproxy_sync_proxy_rules_nonexistent_total[5m])`, true},
		{`rate(kipvs_sync_full_total_bucket[5m])`, true},
		{`kubeproxy_sync_proxy_rules_duration_seconds`, true}, // a histogram has no bare series
		{`sum by (kind) (kipvs_sync_full_total)`, true},
		{`kipvs_sync_errors_total{table="nat"}`, true},
		{`histogram_quantile(0.9, rate(kubeproxy_network_programming_duration_seconds_bucket[5m]))`, true},
		{`sum(rate(x[5m]) `, true},
		{`{__name__="kipvs_sync_full_total"}`, true},
		{`topk(10, sum by (namespace, service, direction) (rate(kipvs_service_bytes_total{vip_kind="node_port"}[5m])))`, false},
		{`sum by (endpoint) (kipvs_endpoint_active_connections{ip_family="IPv6"})`, false},
		{`sum by (endpoint) (kipvs_service_active_connections)`, true}, // endpoint is on kipvs_endpoint_* only
		{`rate(kipvs_service_connections_total{direction="in"}[5m])`, true},
		{`rate(kipvs_service_bytes_in_total[5m])`, true},
	} {
		problems, _ := checkExpr(tc.expr, known)
		if (len(problems) > 0) != tc.bad {
			t.Errorf("checkExpr(%s) = %q, want bad=%v", tc.expr, problems, tc.bad)
		}
	}
}

// TestGrafanaDashboard parses deploy/grafana/kipvs.json and checks every query against the
// metrics kipvs really exports, and that the dashboard covers what it is for.
func TestGrafanaDashboard(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("grafana", "kipvs.json"))
	if err != nil {
		t.Fatal(err)
	}
	type target struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	}
	type panel struct {
		ID         int            `json:"id"`
		Type       string         `json:"type"`
		Title      string         `json:"title"`
		Datasource map[string]any `json:"datasource"`
		GridPos    *struct {
			H, W, X, Y int
		} `json:"gridPos"`
		Targets []target `json:"targets"`
		Panels  []panel  `json:"panels"`
	}
	var dash struct {
		UID           string  `json:"uid"`
		Title         string  `json:"title"`
		SchemaVersion int     `json:"schemaVersion"`
		Panels        []panel `json:"panels"`
		Templating    struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("grafana/kipvs.json is not valid JSON: %v", err)
	}
	if dash.UID == "" || dash.Title == "" || dash.SchemaVersion == 0 {
		t.Errorf("uid %q, title %q, schemaVersion %d: a dashboard needs all three", dash.UID, dash.Title, dash.SchemaVersion)
	}
	known := exportedMetrics(t)
	used := map[string]bool{}
	check := func(where, expr string) {
		problems, fams := checkExpr(expr, known)
		for _, p := range problems {
			t.Errorf("%s: %s", where, p)
		}
		for _, f := range fams {
			used[f] = true
		}
	}
	vars := map[string]bool{}
	for _, v := range dash.Templating.List {
		vars[v.Name] = true
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			var s string
			if err := json.Unmarshal(v.Query, &s); err != nil {
				t.Fatalf("variable %s: query is neither an object nor a string", v.Name)
			}
			q.Query = s
		}
		inner, ok := strings.CutPrefix(q.Query, "label_values(")
		if !ok {
			t.Errorf("variable %s: query %q is not label_values(metric, label)", v.Name, q.Query)
			continue
		}
		metric, label, _ := strings.Cut(strings.TrimSuffix(inner, ")"), ",")
		check("variable "+v.Name, strings.TrimSpace(metric)+"{"+strings.TrimSpace(label)+`=~".*"}`)
	}
	ids := map[int]bool{}
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if ids[p.ID] {
				t.Errorf("panel %q: id %d is used twice", p.Title, p.ID)
			}
			ids[p.ID] = true
			if p.GridPos == nil || (p.Type != "row" && (p.GridPos.W == 0 || p.GridPos.H == 0)) {
				t.Errorf("panel %q has no size", p.Title)
			}
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if uid, _ := p.Datasource["uid"].(string); uid != "${datasource}" {
				t.Errorf("panel %q: datasource uid %q, want ${datasource}", p.Title, uid)
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, tg := range p.Targets {
				check(fmt.Sprintf("panel %q query %s", p.Title, tg.RefID), tg.Expr)
				for _, v := range regexp.MustCompile(`\$(\w+)`).FindAllStringSubmatch(tg.Expr, -1) {
					if !vars[v[1]] && !strings.HasPrefix(v[1], "__") {
						t.Errorf("panel %q: $%s is not a dashboard variable", p.Title, v[1])
					}
				}
			}
		}
	}
	walk(dash.Panels)

	// What the dashboard is for: sync duration quantiles, network programming latency,
	// pending changes, drift repairs, restore failures, Service traffic.
	for _, m := range []string{
		"kubeproxy_sync_proxy_rules_duration_seconds",
		"kubeproxy_network_programming_duration_seconds",
		"kubeproxy_sync_proxy_rules_endpoint_changes_pending",
		"kubeproxy_sync_proxy_rules_service_changes_pending",
		"kipvs_kernel_drift_repaired_total",
		"kubeproxy_sync_proxy_rules_iptables_restore_failures_total",
		"kipvs_service_connections_total",
		"kipvs_service_bytes_total",
		"kipvs_service_active_connections",
		"kipvs_endpoint_connections_total",
		"kipvs_service_stats_scrape_errors_total",
	} {
		if !used[m] {
			t.Errorf("the dashboard has no panel over %s", m)
		}
	}
	var unused []string
	for m := range known {
		if (strings.HasPrefix(m, "kubeproxy_") || strings.HasPrefix(m, "kipvs_")) && !used[m] {
			unused = append(unused, m)
		}
	}
	sort.Strings(unused)
	t.Logf("kipvs metrics without a panel: %v", unused)
}
