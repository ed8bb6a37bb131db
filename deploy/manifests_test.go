package deploy_test

import (
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/kipvs/kipvs/internal/config"
)

// kustomization is the part of a kustomization.yaml these tests read.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
	Images     []struct {
		Name    string `json:"name"`
		NewName string `json:"newName,omitempty"`
		NewTag  string `json:"newTag,omitempty"`
		Digest  string `json:"digest,omitempty"`
	} `json:"images,omitempty"`
	Patches []struct {
		Path   string          `json:"path,omitempty"`
		Patch  string          `json:"patch,omitempty"`
		Target *map[string]any `json:"target,omitempty"`
	} `json:"patches"`
}

// decodeStrict reads a YAML file into out, refusing unknown fields (a misspelt field in a
// manifest would otherwise be dropped silently by the API server).
func decodeStrict(t *testing.T, path string, out any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, out); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// base holds the decoded manifests of deploy/base.
type base struct {
	sa  corev1.ServiceAccount
	cr  rbacv1.ClusterRole
	crb rbacv1.ClusterRoleBinding
	cm  corev1.ConfigMap
	ds  appsv1.DaemonSet
}

func loadBase(t *testing.T) *base {
	t.Helper()
	b := &base{}
	files := map[string]any{
		"serviceaccount.yaml":     &b.sa,
		"clusterrole.yaml":        &b.cr,
		"clusterrolebinding.yaml": &b.crb,
		"configmap.yaml":          &b.cm,
		"daemonset.yaml":          &b.ds,
	}
	for name, out := range files {
		decodeStrict(t, filepath.Join("base", name), out)
	}
	for name, tm := range map[string][2]string{
		"serviceaccount.yaml":     {b.sa.APIVersion, b.sa.Kind},
		"clusterrole.yaml":        {b.cr.APIVersion, b.cr.Kind},
		"clusterrolebinding.yaml": {b.crb.APIVersion, b.crb.Kind},
		"configmap.yaml":          {b.cm.APIVersion, b.cm.Kind},
		"daemonset.yaml":          {b.ds.APIVersion, b.ds.Kind},
	} {
		want := map[string][2]string{
			"serviceaccount.yaml":     {"v1", "ServiceAccount"},
			"clusterrole.yaml":        {"rbac.authorization.k8s.io/v1", "ClusterRole"},
			"clusterrolebinding.yaml": {"rbac.authorization.k8s.io/v1", "ClusterRoleBinding"},
			"configmap.yaml":          {"v1", "ConfigMap"},
			"daemonset.yaml":          {"apps/v1", "DaemonSet"},
		}[name]
		if tm != want {
			t.Errorf("base/%s: apiVersion, kind = %q, want %q", name, tm, want)
		}
	}
	return b
}

// TestKustomizationsListEveryManifest: a manifest added to base/ but not listed would never
// be applied.
func TestKustomizationsListEveryManifest(t *testing.T) {
	var k kustomization
	decodeStrict(t, filepath.Join("base", "kustomization.yaml"), &k)
	files, err := filepath.Glob(filepath.Join("base", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, f := range files {
		if filepath.Base(f) != "kustomization.yaml" {
			want = append(want, filepath.Base(f))
		}
	}
	got := slices.Clone(k.Resources)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("base/kustomization.yaml resources = %v, want every manifest in base/: %v", got, want)
	}

	var top, dropin kustomization
	decodeStrict(t, "kustomization.yaml", &top)
	decodeStrict(t, filepath.Join("kube-proxy-dropin", "kustomization.yaml"), &dropin)
	if !slices.Equal(top.Resources, []string{"base"}) {
		t.Errorf("kustomization.yaml resources = %v, want [base]", top.Resources)
	}
	if !slices.Equal(dropin.Resources, []string{"../base"}) {
		t.Errorf("kube-proxy-dropin/kustomization.yaml resources = %v, want [../base]", dropin.Resources)
	}
	for _, p := range dropin.Patches {
		if p.Path != "" {
			if _, err := os.Stat(filepath.Join("kube-proxy-dropin", p.Path)); err != nil {
				t.Errorf("kube-proxy-dropin patch: %v", err)
			}
		}
	}
}

// releaseImage is the image reference the DaemonSet may name: a release tag or a digest,
// never latest nor a moving tag.
var releaseImage = regexp.MustCompile(`^ghcr\.io/kipvs/kipvs(:v[0-9]+\.[0-9]+\.[0-9]+|@sha256:[0-9a-f]{64})$`)

// TestDaemonSetRequirements checks what the deployment promises: host network,
// node-critical priority, every taint tolerated, privileged with a read-only root, only the
// host mounts kipvs uses, a release image, probes on the health port, rolling updates one
// node at a time, resource requests, and the RBAC chain from the pod's ServiceAccount to the
// ClusterRole.
func TestDaemonSetRequirements(t *testing.T) {
	b := loadBase(t)
	ds := b.ds
	ps := ds.Spec.Template.Spec
	if !ps.HostNetwork {
		t.Error("hostNetwork is not true")
	}
	if ps.PriorityClassName != "system-node-critical" {
		t.Errorf("priorityClassName = %q", ps.PriorityClassName)
	}
	tolerateAll := slices.ContainsFunc(ps.Tolerations, func(tl corev1.Toleration) bool {
		return tl.Key == "" && tl.Operator == corev1.TolerationOpExists && tl.Effect == ""
	})
	if !tolerateAll {
		t.Errorf("tolerations %+v do not tolerate every taint (operator Exists, no key, no effect)", ps.Tolerations)
	}
	if ru := ds.Spec.UpdateStrategy.RollingUpdate; ds.Spec.UpdateStrategy.Type != appsv1.RollingUpdateDaemonSetStrategyType ||
		ru == nil || ru.MaxUnavailable == nil || *ru.MaxUnavailable != intstr.FromInt32(1) {
		t.Errorf("updateStrategy = %+v, want RollingUpdate with maxUnavailable 1", ds.Spec.UpdateStrategy)
	}
	if len(ps.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(ps.Containers))
	}
	c := ps.Containers[0]
	if c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged {
		t.Error("container is not privileged")
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := c.Resources.Requests[r]; !ok || q.IsZero() {
			t.Errorf("no %s request", r)
		}
	}
	if len(c.Resources.Limits) != 0 {
		t.Errorf("limits %v: a throttled or OOM-killed proxy stalls every Service on its node", c.Resources.Limits)
	}
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"livenessProbe", c.LivenessProbe, "/livez"}, {"readinessProbe", c.ReadinessProbe, "/healthz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s: not an HTTP probe", p.name)
			continue
		}
		if p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port != intstr.FromInt32(config.DefaultHealthzPort) {
			t.Errorf("%s: %s on port %s, want %s on %d", p.name, p.probe.HTTPGet.Path, p.probe.HTTPGet.Port.String(), p.path, config.DefaultHealthzPort)
		}
	}
	hostPaths := map[string]*corev1.HostPathVolumeSource{}
	for _, v := range ps.Volumes {
		if v.HostPath != nil {
			hostPaths[v.Name] = v.HostPath
		}
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m
	}
	for _, want := range []struct {
		path     string
		readOnly bool
		typ      corev1.HostPathType
	}{{"/run/xtables.lock", false, corev1.HostPathFileOrCreate}} {
		m, ok := mounts[want.path]
		if !ok {
			t.Errorf("no mount at %s", want.path)
			continue
		}
		hp := hostPaths[m.Name]
		if hp == nil || hp.Path != want.path {
			t.Errorf("mount %s is not the host's %s", want.path, want.path)
			continue
		}
		if m.ReadOnly != want.readOnly {
			t.Errorf("mount %s readOnly = %v, want %v", want.path, m.ReadOnly, want.readOnly)
		}
		if want.typ != "" && (hp.Type == nil || *hp.Type != want.typ) {
			t.Errorf("hostPath %s type = %v, want %s", want.path, hp.Type, want.typ)
		}
	}

	// Hardening (issue 23): nothing but the config and the xtables lock is mounted (kipvs
	// reads no /lib/modules), the image's own files are read-only, and the image is a
	// release, not latest.
	for _, v := range ps.Volumes {
		if v.HostPath != nil && v.HostPath.Path != "/run/xtables.lock" {
			t.Errorf("volume %s mounts the host's %s, which kipvs does not use", v.Name, v.HostPath.Path)
		}
	}
	if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("readOnlyRootFilesystem is not true")
	}
	if !releaseImage.MatchString(c.Image) {
		t.Errorf("image %q is not ghcr.io/kipvs/kipvs at a release tag (vX.Y.Z) or a digest", c.Image)
	}

	if ps.ServiceAccountName != b.sa.Name || ds.Namespace != b.sa.Namespace {
		t.Errorf("pod runs as %s/%s, the manifest's ServiceAccount is %s/%s", ds.Namespace, ps.ServiceAccountName, b.sa.Namespace, b.sa.Name)
	}
	if b.crb.RoleRef.Kind != "ClusterRole" || b.crb.RoleRef.Name != b.cr.Name {
		t.Errorf("ClusterRoleBinding refers to %s %s, want ClusterRole %s", b.crb.RoleRef.Kind, b.crb.RoleRef.Name, b.cr.Name)
	}
	if !slices.ContainsFunc(b.crb.Subjects, func(s rbacv1.Subject) bool {
		return s.Kind == "ServiceAccount" && s.Name == b.sa.Name && s.Namespace == b.sa.Namespace
	}) {
		t.Errorf("ClusterRoleBinding subjects %+v do not include the ServiceAccount", b.crb.Subjects)
	}
}

// daemonSetArgs turns the DaemonSet's container command into kipvs run's arguments as the
// kubelet would start them on node: $(NODE_NAME) expanded, and --config pointing at the
// ConfigMap's file written into dir as the configMap volume would show it.
func daemonSetArgs(t *testing.T, ds *appsv1.DaemonSet, cm *corev1.ConfigMap, node, dir string) (args []string, mountPath string) {
	t.Helper()
	ps := ds.Spec.Template.Spec
	c := ps.Containers[0]
	if len(c.Command) < 2 || c.Command[1] != "run" {
		t.Fatalf("container command %q does not run `kipvs run`", c.Command)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName" {
			env[e.Name] = node
		}
	}
	var cmVolume string
	for _, v := range ps.Volumes {
		if v.ConfigMap != nil && v.ConfigMap.Name == cm.Name {
			cmVolume = v.Name
		}
	}
	for _, m := range c.VolumeMounts {
		if m.Name == cmVolume {
			mountPath = m.MountPath
		}
	}
	if mountPath == "" {
		t.Fatalf("the ConfigMap %s is not mounted into the container", cm.Name)
	}
	for key, val := range cm.Data {
		if err := os.WriteFile(filepath.Join(dir, key), []byte(val), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range c.Command[2:] {
		for k, v := range env {
			a = strings.ReplaceAll(a, "$("+k+")", v)
		}
		if strings.Contains(a, "$(") {
			t.Fatalf("argument %q refers to an undefined variable", a)
		}
		if p, ok := strings.CutPrefix(a, "--config="); ok {
			rel, found := strings.CutPrefix(p, mountPath+"/")
			if !found {
				t.Fatalf("--config=%s is not in the ConfigMap mount %s", p, mountPath)
			}
			if _, ok := cm.Data[rel]; !ok {
				t.Fatalf("--config=%s: the ConfigMap has no key %q", p, rel)
			}
			a = "--config=" + filepath.Join(dir, rel)
		}
		args = append(args, a)
	}
	return args, mountPath
}

// TestDaemonSetConfigIsWhatKipvsParses loads the ConfigMap's KubeProxyConfiguration exactly
// as the DaemonSet hands it to kipvs (its command line, then config.Load) and checks that it
// agrees with the rest of the deployment.
func TestDaemonSetConfigIsWhatKipvsParses(t *testing.T) {
	b := loadBase(t)
	dir := t.TempDir()
	args, mountPath := daemonSetArgs(t, &b.ds, &b.cm, "node-1", dir)

	fs := pflag.NewFlagSet("kipvs run", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	flags := config.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("kipvs run %q: %v", args, err)
	}
	core, logs := observer.New(zapcore.DebugLevel)
	cfg, err := config.Load(flags, zap.New(core))
	if err != nil {
		t.Fatalf("kipvs run %q: %v", args, err)
	}
	for _, e := range logs.All() {
		t.Errorf("config.conf holds a setting kipvs ignores: %s %v", e.Message, e.ContextMap())
	}
	if cfg.Mode != config.ProxyModeIPVS {
		t.Errorf("mode = %q", cfg.Mode)
	}
	if cfg.HostnameOverride != "node-1" {
		t.Errorf("hostnameOverride = %q, want the node name from $(NODE_NAME)", cfg.HostnameOverride)
	}
	if got := cfg.HealthzBindAddress; !got.IsValid() || got.Port() != config.DefaultHealthzPort || !got.Addr().IsUnspecified() {
		t.Errorf("healthzBindAddress = %v: the probes need the health server on every address, port %d", got, config.DefaultHealthzPort)
	}
	if cfg.IPVS.SyncPeriod <= 0 {
		t.Errorf("ipvs.syncPeriod = %v", cfg.IPVS.SyncPeriod)
	}

	// The kubeconfig is the ConfigMap's other key, authenticating with the pod's
	// ServiceAccount token.
	rel, ok := strings.CutPrefix(cfg.ClientConnection.Kubeconfig, mountPath+"/")
	if !ok {
		t.Fatalf("clientConnection.kubeconfig %q is not in the ConfigMap mount %s", cfg.ClientConnection.Kubeconfig, mountPath)
	}
	kc, ok := b.cm.Data[rel]
	if !ok {
		t.Fatalf("clientConnection.kubeconfig: the ConfigMap has no key %q", rel)
	}
	kcfg, err := clientcmd.Load([]byte(kc))
	if err != nil {
		t.Fatalf("kubeconfig.conf: %v", err)
	}
	kctx := kcfg.Contexts[kcfg.CurrentContext]
	if kctx == nil || kcfg.Clusters[kctx.Cluster] == nil || kcfg.AuthInfos[kctx.AuthInfo] == nil {
		t.Fatalf("kubeconfig.conf: current context %q does not name a cluster and a user", kcfg.CurrentContext)
	}
	cluster, user := kcfg.Clusters[kctx.Cluster], kcfg.AuthInfos[kctx.AuthInfo]
	const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"
	if user.TokenFile != saDir+"/token" || cluster.CertificateAuthority != saDir+"/ca.crt" {
		t.Errorf("kubeconfig.conf authenticates with token file %q and CA %q, want the ServiceAccount's %s/token and %s/ca.crt",
			user.TokenFile, cluster.CertificateAuthority, saDir, saDir)
	}
	if !strings.HasPrefix(cluster.Server, "https://") {
		t.Errorf("kubeconfig.conf server %q is not https", cluster.Server)
	}

	// config.Parse reads the same file to the same configuration (flags aside).
	parsed, err := config.Parse([]byte(b.cm.Data["config.conf"]), nil)
	if err != nil {
		t.Fatalf("config.Parse(config.conf): %v", err)
	}
	parsed.HostnameOverride = cfg.HostnameOverride
	parsed.ConfigFile = cfg.ConfigFile
	if parsed.Mode != cfg.Mode || parsed.IPVS.SyncPeriod != cfg.IPVS.SyncPeriod || parsed.IPVS.MinSyncPeriod != cfg.IPVS.MinSyncPeriod ||
		parsed.IPVS.Scheduler != cfg.IPVS.Scheduler || parsed.HealthzBindAddress != cfg.HealthzBindAddress ||
		parsed.MetricsBindAddress != cfg.MetricsBindAddress || parsed.ClientConnection != cfg.ClientConnection {
		t.Errorf("config.Parse and the DaemonSet's command line disagree:\nParse: %+v\nLoad:  %+v", parsed, cfg)
	}
}

// TestDropInPatches: the overlay replaces the base's config volume (same volume name, so the
// strategic merge swaps the ConfigMap instead of adding a second volume), and kipvs avoids
// exactly the nodes the kube-proxy patch sends kube-proxy to.
func TestDropInPatches(t *testing.T) {
	b := loadBase(t)
	var patch appsv1.DaemonSet
	decodeStrict(t, filepath.Join("kube-proxy-dropin", "daemonset-patch.yaml"), &patch)
	if patch.Name != b.ds.Name || patch.Namespace != b.ds.Namespace {
		t.Errorf("patch targets %s/%s, the DaemonSet is %s/%s", patch.Namespace, patch.Name, b.ds.Namespace, b.ds.Name)
	}
	var baseVolume string
	for _, v := range b.ds.Spec.Template.Spec.Volumes {
		if v.ConfigMap != nil && v.ConfigMap.Name == b.cm.Name {
			baseVolume = v.Name
		}
	}
	pv := patch.Spec.Template.Spec.Volumes
	if len(pv) != 1 || pv[0].Name != baseVolume || pv[0].ConfigMap == nil || pv[0].ConfigMap.Name != "kube-proxy" {
		t.Errorf("patch volumes %+v, want volume %q from ConfigMap kube-proxy", pv, baseVolume)
	}

	var scaleAway appsv1.DaemonSet
	decodeStrict(t, filepath.Join("kube-proxy-dropin", "kube-proxy-scale-away.yaml"), &scaleAway)
	sel := scaleAway.Spec.Template.Spec.NodeSelector
	if len(sel) != 1 {
		t.Fatalf("kube-proxy-scale-away.yaml nodeSelector %v, want one label", sel)
	}
	var key string
	for k := range sel {
		key = k
	}
	aff := patch.Spec.Template.Spec.Affinity
	if aff == nil || aff.NodeAffinity == nil || aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		t.Fatal("the drop-in DaemonSet has no required node affinity")
	}
	terms := aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 1 || len(terms[0].MatchExpressions) != 1 ||
		terms[0].MatchExpressions[0].Key != key || terms[0].MatchExpressions[0].Operator != corev1.NodeSelectorOpDoesNotExist {
		t.Errorf("drop-in affinity %+v, want %s DoesNotExist (the label kube-proxy is sent to)", terms, key)
	}
}

// TestContainerfileBasesPinned: every stage of the image is built FROM scratch or from a
// base pinned by digest, so that the same Containerfile always builds the same image.
func TestContainerfileBasesPinned(t *testing.T) {
	b, err := os.ReadFile("Containerfile")
	if err != nil {
		t.Fatal(err)
	}
	pinned := regexp.MustCompile(`^FROM (scratch|[^\s@]+@sha256:[0-9a-f]{64})( AS \S+)?$`)
	n := 0
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "FROM ") {
			continue
		}
		n++
		if !pinned.MatchString(line) {
			t.Errorf("Containerfile: %q is not scratch nor pinned by digest", line)
		}
	}
	if n == 0 {
		t.Error("Containerfile has no FROM")
	}
}
