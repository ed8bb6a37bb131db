package deploy_test

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
	"go.uber.org/zap"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/kipvs/kipvs/internal/config"
)

// chartDir is the Helm chart, from this package's directory.
var chartDir = filepath.Join("..", "charts", "kipvs")

// tool returns the binary an environment variable names (make test-chart sets them), or
// skips the test when it is not set (a plain go test ./... on a machine without them).
func tool(t *testing.T, env string) string {
	t.Helper()
	p := os.Getenv(env)
	if p == "" {
		t.Skipf("%s is not set (make test-chart sets it)", env)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s: %v", env, err)
	}
	return p
}

// objects is a rendered manifest stream, by "Kind/name".
type objects map[string][]byte

func splitManifests(t *testing.T, out []byte) objects {
	t.Helper()
	objs := objects{}
	for _, doc := range bytes.Split(out, []byte("\n---")) {
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatalf("rendered manifest: %v\n%s", err, doc)
		}
		if meta.Kind == "" {
			continue
		}
		key := meta.Kind + "/" + meta.Metadata.Name
		if _, dup := objs[key]; dup {
			t.Fatalf("%s rendered twice", key)
		}
		objs[key] = doc
	}
	return objs
}

// get decodes one object strictly (an unknown field is a template mistake).
func (o objects) get(t *testing.T, key string, out any) {
	t.Helper()
	b, ok := o[key]
	if !ok {
		t.Fatalf("%s not rendered (have %v)", key, o.keys())
	}
	if err := yaml.UnmarshalStrict(b, out); err != nil {
		t.Fatalf("%s: %v", key, err)
	}
}

func (o objects) keys() []string {
	var ks []string
	for k := range o {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func run(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// helmTemplate renders the chart as release kipvs in kube-system, as charts/kipvs/README.md
// installs it.
func helmTemplate(t *testing.T, args ...string) objects {
	t.Helper()
	helm := tool(t, "KIPVS_HELM")
	return splitManifests(t, run(t, helm, append([]string{"template", "kipvs", chartDir, "--namespace", "kube-system"}, args...)...))
}

func kustomizeBuild(t *testing.T, dir string) objects {
	t.Helper()
	return splitManifests(t, run(t, tool(t, "KIPVS_KUSTOMIZE"), "build", dir))
}

// podFields is what the two install paths must agree on in the DaemonSet: everything that
// decides what runs on the node and how (labels that only name the installer aside).
type podFields struct {
	Selector       map[string]string
	UpdateStrategy appsv1.DaemonSetUpdateStrategy
	PodLabel       string // k8s-app
	Spec           corev1.PodSpec
}

func daemonSetFields(ds *appsv1.DaemonSet) podFields {
	return podFields{
		Selector:       ds.Spec.Selector.MatchLabels,
		UpdateStrategy: ds.Spec.UpdateStrategy,
		PodLabel:       ds.Spec.Template.Labels["k8s-app"],
		Spec:           ds.Spec.Template.Spec,
	}
}

// configMapData parses a kube-proxy-layout ConfigMap's two files (comments and layout aside).
func configMapData(t *testing.T, cm *corev1.ConfigMap) map[string]any {
	t.Helper()
	out := map[string]any{}
	for k, v := range cm.Data {
		var parsed any
		if err := yaml.Unmarshal([]byte(v), &parsed); err != nil {
			t.Fatalf("ConfigMap %s key %s: %v", cm.Name, k, err)
		}
		out[k] = parsed
	}
	return out
}

// TestChartMatchesKustomize: with its default values the chart renders the kustomize base's
// objects (deploy/), and with useKubeProxyConfigMap the drop-in overlay's
// (deploy/kube-proxy-dropin): the same DaemonSet pod spec (command, env, security context,
// probes, resources, volumes and mounts, scheduling), ConfigMap content, RBAC rules and
// names, so the two install paths cannot drift apart.
func TestChartMatchesKustomize(t *testing.T) {
	for _, tc := range []struct {
		name      string
		kustomize string
		helmArgs  []string
	}{
		{"plain", ".", nil},
		{"kube-proxy ConfigMap", "kube-proxy-dropin", []string{"--set", "useKubeProxyConfigMap=true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			chart := helmTemplate(t, tc.helmArgs...)
			kust := kustomizeBuild(t, tc.kustomize)
			if got, want := chart.keys(), kust.keys(); !slices.Equal(got, want) {
				t.Errorf("the chart renders %v, kustomize %v", got, want)
			}
			var cds, kds appsv1.DaemonSet
			chart.get(t, "DaemonSet/kipvs", &cds)
			kust.get(t, "DaemonSet/kipvs", &kds)
			if cds.Namespace != kds.Namespace {
				t.Errorf("DaemonSet namespace: chart %q, kustomize %q", cds.Namespace, kds.Namespace)
			}
			if d := cmp.Diff(daemonSetFields(&kds), daemonSetFields(&cds)); d != "" {
				t.Errorf("the chart's DaemonSet differs from the kustomize render's (-kustomize +chart):\n%s", d)
			}
			if _, ok := kust["ConfigMap/kipvs"]; ok {
				var ccm, kcm corev1.ConfigMap
				chart.get(t, "ConfigMap/kipvs", &ccm)
				kust.get(t, "ConfigMap/kipvs", &kcm)
				if d := cmp.Diff(configMapData(t, &kcm), configMapData(t, &ccm)); d != "" || ccm.Namespace != kcm.Namespace {
					t.Errorf("the chart's ConfigMap %s differs from the kustomize render's %s (-kustomize +chart):\n%s", ccm.Namespace, kcm.Namespace, d)
				}
			}
			var ccr, kcr rbacv1.ClusterRole
			chart.get(t, "ClusterRole/kipvs", &ccr)
			kust.get(t, "ClusterRole/kipvs", &kcr)
			if d := cmp.Diff(kcr.Rules, ccr.Rules); d != "" {
				t.Errorf("ClusterRole rules differ (-kustomize +chart):\n%s", d)
			}
			var ccrb, kcrb rbacv1.ClusterRoleBinding
			chart.get(t, "ClusterRoleBinding/kipvs", &ccrb)
			kust.get(t, "ClusterRoleBinding/kipvs", &kcrb)
			if d := cmp.Diff([]any{kcrb.RoleRef, kcrb.Subjects}, []any{ccrb.RoleRef, ccrb.Subjects}); d != "" {
				t.Errorf("ClusterRoleBinding differs (-kustomize +chart):\n%s", d)
			}
			var csa, ksa corev1.ServiceAccount
			chart.get(t, "ServiceAccount/kipvs", &csa)
			kust.get(t, "ServiceAccount/kipvs", &ksa)
			if csa.Namespace != ksa.Namespace {
				t.Errorf("ServiceAccount namespace: chart %q, kustomize %q", csa.Namespace, ksa.Namespace)
			}
		})
	}
}

// TestChartValues renders ci/plain-values.yaml (every value set) and ci/kubeproxy-values.yaml
// and checks where each value lands, down to the configuration kipvs parses from the
// DaemonSet's command line and ConfigMap.
func TestChartValues(t *testing.T) {
	t.Run("plain", func(t *testing.T) {
		o := helmTemplate(t, "--values", filepath.Join(chartDir, "ci", "plain-values.yaml"))
		var ds appsv1.DaemonSet
		var cm corev1.ConfigMap
		o.get(t, "DaemonSet/kipvs", &ds)
		o.get(t, "ConfigMap/kipvs", &cm)
		ps := ds.Spec.Template.Spec
		c := ps.Containers[0]
		if c.Image != "registry.example/kipvs:v9.8.7" || c.ImagePullPolicy != corev1.PullAlways {
			t.Errorf("image %s, pull policy %s", c.Image, c.ImagePullPolicy)
		}
		if want := []string{"--v=2", "--kipvs-max-real-servers=50000"}; !slices.Equal(c.Command[len(c.Command)-2:], want) {
			t.Errorf("command %q does not end in extraArgs %q", c.Command, want)
		}
		if ps.PriorityClassName != "system-cluster-critical" || ps.NodeSelector["example.com/proxy"] != "kipvs" ||
			len(ps.Tolerations) != 1 || ps.Tolerations[0].Key != "node-role.kubernetes.io/control-plane" {
			t.Errorf("scheduling: priority %q, nodeSelector %v, tolerations %+v", ps.PriorityClassName, ps.NodeSelector, ps.Tolerations)
		}
		if c.Resources.Limits.Memory().String() != "512Mi" || c.Resources.Requests.Cpu().String() != "100m" {
			t.Errorf("resources %+v", c.Resources)
		}
		for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe} {
			if p.HTTPGet.Port != intstr.FromInt32(9256) {
				t.Errorf("probe on port %s, want healthzBindAddress's 9256", p.HTTPGet.Port.String())
			}
		}
		if ps.Affinity != nil {
			t.Errorf("plain mode has an affinity: %+v", ps.Affinity)
		}

		// kipvs's own reading of what the chart hands it.
		dir := t.TempDir()
		args, _ := daemonSetArgs(t, &ds, &cm, "node-1", dir)
		fs := pflag.NewFlagSet("kipvs run", pflag.ContinueOnError)
		fs.SetOutput(io.Discard)
		flags := config.AddFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatalf("kipvs run %q: %v", args, err)
		}
		cfg, err := config.Load(flags, zap.NewNop())
		if err != nil {
			t.Fatalf("kipvs run %q: %v", args, err)
		}
		var cidrs []string
		for _, p := range cfg.ClusterCIDRs {
			cidrs = append(cidrs, p.String())
		}
		if got := strings.Join(cidrs, ","); got != "10.244.0.0/16,fd00:10:244::/56" {
			t.Errorf("clusterCIDR = %s", got)
		}
		if cfg.Kipvs.FilterBackend != config.FilterNFTables {
			t.Errorf("filter backend %q, want filterBackend's nftables", cfg.Kipvs.FilterBackend)
		}
		if cfg.MetricsBindAddress.String() != "0.0.0.0:9249" || cfg.HealthzBindAddress.String() != "0.0.0.0:9256" {
			t.Errorf("metricsBindAddress %v, healthzBindAddress %v", cfg.MetricsBindAddress, cfg.HealthzBindAddress)
		}
		kc, err := clientcmd.Load([]byte(cm.Data["kubeconfig.conf"]))
		if err != nil {
			t.Fatal(err)
		}
		if s := kc.Clusters[kc.Contexts[kc.CurrentContext].Cluster].Server; s != "https://10.0.0.10:8443" {
			t.Errorf("kubeconfig server %q, want apiServer's https://10.0.0.10:8443", s)
		}

		checkMonitoring(t, o, 9249, "15s", map[string]string{"release": "prometheus"}, map[string]string{"team": "network"})
	})

	t.Run("kube-proxy ConfigMap", func(t *testing.T) {
		o := helmTemplate(t, "--values", filepath.Join(chartDir, "ci", "kubeproxy-values.yaml"))
		if _, ok := o["ConfigMap/kipvs"]; ok {
			t.Error("kipvs's own ConfigMap rendered with useKubeProxyConfigMap")
		}
		var ds appsv1.DaemonSet
		o.get(t, "DaemonSet/kipvs", &ds)
		c := ds.Spec.Template.Spec.Containers[0]
		if c.Image != "ghcr.io/kipvs/kipvs@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" {
			t.Errorf("image %s, want the digest", c.Image)
		}
		want := []string{"/usr/local/bin/kipvs", "run", "--config=/var/lib/kube-proxy/config.conf", "--hostname-override=$(NODE_NAME)",
			"--proxy-mode=ipvs", "--master=https://[fd00::10]:6443", "--kipvs-debug-endpoints=false"}
		if !slices.Equal(c.Command, want) {
			t.Errorf("command %q, want %q", c.Command, want)
		}
		// --master is a flag kipvs takes beside --config, as kube-proxy does.
		fs := pflag.NewFlagSet("kipvs run", pflag.ContinueOnError)
		fs.SetOutput(io.Discard)
		config.AddFlags(fs)
		if err := fs.Parse(c.Command[2:]); err != nil {
			t.Errorf("kipvs run %q: %v", c.Command[2:], err)
		}
		var vol string
		for _, v := range ds.Spec.Template.Spec.Volumes {
			if v.ConfigMap != nil {
				vol = v.ConfigMap.Name
			}
		}
		if vol != "kube-proxy" {
			t.Errorf("config volume from ConfigMap %q, want kube-proxy", vol)
		}
		checkMonitoring(t, o, 10249, "30s", nil, nil)
	})
}

// checkMonitoring: the Service and ServiceMonitor scrape the metrics port, the PrometheusRule
// holds deploy/monitoring's rules, the dashboard ConfigMap Grafana's sidecar label and
// deploy/grafana's dashboard, each with the extra labels given.
func checkMonitoring(t *testing.T, o objects, port int32, interval string, ruleLabels, dashLabels map[string]string) {
	t.Helper()
	var svc corev1.Service
	o.get(t, "Service/kipvs-metrics", &svc)
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != port || svc.Spec.Ports[0].Name != "metrics" || svc.Spec.ClusterIP != "None" {
		t.Errorf("metrics Service %+v, want headless, port metrics %d", svc.Spec, port)
	}
	var sm struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
		Spec struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			Endpoints []struct {
				Port     string `json:"port"`
				Interval string `json:"interval"`
			} `json:"endpoints"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(o["ServiceMonitor/kipvs"], &sm); err != nil {
		t.Fatal(err)
	}
	for k, v := range sm.Spec.Selector.MatchLabels {
		if svc.Labels[k] != v {
			t.Errorf("the ServiceMonitor selects %s=%s, the Service has %s=%q", k, v, k, svc.Labels[k])
		}
	}
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "metrics" || sm.Spec.Endpoints[0].Interval != interval {
		t.Errorf("ServiceMonitor endpoints %+v, want port metrics every %s", sm.Spec.Endpoints, interval)
	}
	for k, v := range ruleLabels {
		if sm.Metadata.Labels[k] != v {
			t.Errorf("ServiceMonitor label %s = %q, want %q", k, sm.Metadata.Labels[k], v)
		}
	}

	var rule struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
		Spec any `json:"spec"`
	}
	if err := yaml.Unmarshal(o["PrometheusRule/kipvs"], &rule); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(readYAML(t, filepath.Join("monitoring", "kipvs.rules.yaml")), rule.Spec); d != "" {
		t.Errorf("the chart's PrometheusRule spec differs from monitoring/kipvs.rules.yaml (-file +chart):\n%s", d)
	}
	for k, v := range ruleLabels {
		if rule.Metadata.Labels[k] != v {
			t.Errorf("PrometheusRule label %s = %q, want %q", k, rule.Metadata.Labels[k], v)
		}
	}

	var dash corev1.ConfigMap
	o.get(t, "ConfigMap/kipvs-dashboard", &dash)
	if dash.Labels["grafana_dashboard"] != "1" {
		t.Errorf("dashboard ConfigMap labels %v lack grafana_dashboard: \"1\"", dash.Labels)
	}
	for k, v := range dashLabels {
		if dash.Labels[k] != v {
			t.Errorf("dashboard label %s = %q, want %q", k, dash.Labels[k], v)
		}
	}
	want, err := os.ReadFile(filepath.Join("grafana", "kipvs.json"))
	if err != nil {
		t.Fatal(err)
	}
	if dash.Data["kipvs.json"] != strings.TrimRight(string(want), "\n") {
		t.Error("the dashboard ConfigMap's kipvs.json is not grafana/kipvs.json")
	}
}

func readYAML(t *testing.T, path string) any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := yaml.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}
