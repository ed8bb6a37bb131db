//go:build e2e

package deploy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/kipvs/kipvs/e2e/harness"
)

// fieldManager owns what the tests apply; a second apply by it is a no-op.
const fieldManager = "kipvs-e2e-deploy"

// env is what e2erun passes (see the Makefile's test-e2e).
type env struct {
	kubeconfig string // KIPVS_E2E_KUBECONFIG: admin kubeconfig for the apiserver as the VM sees it
	kipvs      string // KIPVS_BIN
	kustomize  string // KIPVS_KUSTOMIZE
	deployDir  string // KIPVS_DEPLOY_DIR: the repository's deploy/
}

func loadEnv(t testing.TB) env {
	t.Helper()
	e := env{
		kubeconfig: os.Getenv("KIPVS_E2E_KUBECONFIG"),
		kipvs:      os.Getenv("KIPVS_BIN"),
		kustomize:  os.Getenv("KIPVS_KUSTOMIZE"),
		deployDir:  os.Getenv("KIPVS_DEPLOY_DIR"),
	}
	for name, v := range map[string]string{"KIPVS_E2E_KUBECONFIG": e.kubeconfig, "KIPVS_BIN": e.kipvs,
		"KIPVS_KUSTOMIZE": e.kustomize, "KIPVS_DEPLOY_DIR": e.deployDir} {
		if v == "" {
			t.Fatalf("%s is not set: run through make test-e2e (e2erun)", name)
		}
		if _, err := os.Stat(v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if os.Getenv("KIPVS_IN_VM") != "1" {
		t.Fatal("these tests program the kernel of the machine they run on: run them in the VM (make test-e2e)")
	}
	return e
}

// api is an admin connection to the e2e apiserver.
type api struct {
	cfg    *rest.Config
	cs     kubernetes.Interface
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

func newAPI(t testing.TB, e env) *api {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", e.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &api{cfg: cfg, cs: cs, dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}
}

func ctxT(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// render runs kustomize build on a directory of deploy/ and decodes the output.
func render(t testing.TB, e env, dir string) []*unstructured.Unstructured {
	t.Helper()
	cmd := exec.Command(e.kustomize, "build", filepath.Join(e.deployDir, dir))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kustomize build %s: %v\n%s", dir, err, stderr.String())
	}
	return decodeObjects(t, out)
}

// decodeObjects splits a YAML stream into objects.
func decodeObjects(t testing.TB, data []byte) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("decoding manifests: %v", err)
		}
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
	return objs
}

func objName(o *unstructured.Unstructured) string {
	if ns := o.GetNamespace(); ns != "" {
		return o.GetKind() + " " + ns + "/" + o.GetName()
	}
	return o.GetKind() + " " + o.GetName()
}

func (a *api) resource(t testing.TB, o *unstructured.Unstructured) dynamic.ResourceInterface {
	t.Helper()
	gvk := o.GroupVersionKind()
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		t.Fatalf("%s: %v", objName(o), err)
	}
	if ns := o.GetNamespace(); ns != "" {
		return a.dyn.Resource(m.Resource).Namespace(ns)
	}
	return a.dyn.Resource(m.Resource)
}

// apply server-side-applies each object as manager and returns what the server holds.
func (a *api) apply(t testing.TB, manager string, objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	t.Helper()
	ctx := ctxT(t)
	var out []*unstructured.Unstructured
	for _, o := range objs {
		got, err := a.resource(t, o).Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: manager, Force: true})
		if err != nil {
			t.Fatalf("server-side apply %s: %v", objName(o), err)
		}
		out = append(out, got)
	}
	return out
}

// get reads an object back.
func (a *api) get(t testing.TB, o *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	got, err := a.resource(t, o).Get(ctxT(t), o.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get %s: %v", objName(o), err)
	}
	return got
}

// deleteOnCleanup removes the objects when the test ends (missing ones are fine).
func (a *api) deleteOnCleanup(t testing.TB, objs ...*unstructured.Unstructured) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, o := range objs {
			err := a.resource(t, o).Delete(ctx, o.GetName(), metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete %s: %v", objName(o), err)
			}
		}
	})
}

// subset returns where got differs from want, for every field want sets: the server may
// add fields (defaults, status, metadata), but must keep every field as written.
func subset(path string, want, got any) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: %v, want an object", path, got)}
		}
		var out []string
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			gv, ok := g[k]
			if !ok {
				if isEmpty(w[k]) {
					continue // the server drops empty fields
				}
				out = append(out, fmt.Sprintf("%s.%s: missing, want %v", path, k, w[k]))
				continue
			}
			out = append(out, subset(path+"."+k, w[k], gv)...)
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{fmt.Sprintf("%s: %v, want %v", path, got, want)}
		}
		var out []string
		for i := range w {
			out = append(out, subset(fmt.Sprintf("%s[%d]", path, i), w[i], g[i])...)
		}
		return out
	default:
		if wn, ok := number(want); ok {
			if gn, ok := number(got); ok && wn == gn {
				return nil
			}
		}
		if !reflect.DeepEqual(want, got) {
			return []string{fmt.Sprintf("%s: %v (%T), want %v (%T)", path, got, got, want, want)}
		}
		return nil
	}
}

func isEmpty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	}
	return false
}

func number(v any) (float64, bool) {
	switch x := v.(type) {
	case int64:
		return float64(x), true
	case int:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

// typed converts an unstructured object into a typed one.
func typed[T any](t testing.TB, o *unstructured.Unstructured) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, out); err != nil {
		t.Fatalf("%s: %v", objName(o), err)
	}
	return out
}

// find returns the rendered object of a kind and name.
func find(t testing.TB, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s among the rendered objects", kind, name)
	return nil
}

// startKipvs starts kipvs (bin: the binary, or chroot with the arguments that run the
// image's) with args as e2e/harness supervises it; the test's cleanup stops it.
func startKipvs(t testing.TB, bin string, args ...string) *harness.Kipvs {
	t.Helper()
	return harness.Start(t, "kipvs", bin, args...)
}

// logOf returns kipvs's output so far, with JSON-escaped quotes unescaped (the API's error
// messages quote resource names, and the console encoder escapes them inside fields).
func logOf(k *harness.Kipvs) string { return strings.ReplaceAll(k.Log(), `\"`, `"`) }

// lastSync is kubeproxy_sync_proxy_rules_last_timestamp_seconds for IPv4 (0: never synced).
func lastSync() (time.Time, error) {
	m, err := harness.FetchMetrics()
	if err != nil {
		return time.Time{}, err
	}
	v := m[`kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4"}`]
	if v == 0 {
		return time.Time{}, nil
	}
	sec, frac := math.Modf(v)
	return time.Unix(int64(sec), int64(frac*1e9)), nil
}

// realServers lists the real servers of one TCP virtual server, as ipvsadm shows them.
func realServers(vip string) ([]string, error) {
	out, err := harness.Run("ipvsadm", "-Ln", "-t", vip)
	if err != nil {
		return nil, err
	}
	var rs []string
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) >= 2 && f[0] == "->" && f[1] != "RemoteAddress:Port" {
			rs = append(rs, f[1])
		}
	}
	sort.Strings(rs)
	return rs, nil
}

// kubeconfigFor writes a kubeconfig for the apiserver authenticating with a bearer token.
func kubeconfigFor(t testing.TB, cfg *rest.Config, token string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kubeconfig")
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: %s
    insecure-skip-tls-verify: true
users:
- name: sa
  user:
    token: %s
contexts:
- name: e2e
  context: {cluster: e2e, user: sa}
current-context: e2e
`, cfg.Host, token)
	if err := os.WriteFile(p, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// daemonSetArgs turns the DaemonSet's container command into `kipvs` arguments as the
// kubelet would run them on node, with the ConfigMap (cm) written where its volume would be
// mounted, and with the given kubeconfig in place of the in-cluster one (in the config file).
func daemonSetArgs(t testing.TB, ds *appsv1.DaemonSet, cm *corev1.ConfigMap, node, kubeconfig string) []string {
	t.Helper()
	c := ds.Spec.Template.Spec.Containers[0]
	var mount string
	for _, v := range ds.Spec.Template.Spec.Volumes {
		if v.ConfigMap == nil || v.ConfigMap.Name != cm.Name {
			continue
		}
		for _, m := range c.VolumeMounts {
			if m.Name == v.Name {
				mount = m.MountPath
			}
		}
	}
	if mount == "" {
		t.Fatalf("the DaemonSet does not mount ConfigMap %s", cm.Name)
	}
	dir := t.TempDir()
	for k, v := range cm.Data {
		if err := os.WriteFile(filepath.Join(dir, k), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if len(c.Command) < 2 || filepath.Base(c.Command[0]) != "kipvs" {
		t.Fatalf("container command %q does not run kipvs", c.Command)
	}
	var args []string
	for _, a := range c.Command[1:] {
		a = strings.ReplaceAll(a, "$(NODE_NAME)", node)
		if p, ok := strings.CutPrefix(a, "--config="); ok {
			rel, ok := strings.CutPrefix(p, mount+"/")
			if !ok {
				t.Fatalf("--config=%s is outside the ConfigMap mount %s", p, mount)
			}
			a = "--config=" + filepath.Join(dir, rel)
			useKubeconfig(t, filepath.Join(dir, rel), kubeconfig)
		}
		args = append(args, a)
	}
	return args
}

// useKubeconfig points the config file's clientConnection.kubeconfig at kubeconfig: with
// --config, kipvs ignores --kubeconfig, as kube-proxy does.
func useKubeconfig(t testing.TB, file, kubeconfig string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	cc, _ := doc["clientConnection"].(map[string]any)
	if cc == nil {
		cc = map[string]any{}
	}
	cc["kubeconfig"] = kubeconfig
	doc["clientConnection"] = cc
	if b, err = yaml.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
