package node

import (
	"cmp"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/kipvs/kipvs/internal/testutil/poll"
)

// The placeholders deploy/base/configmap.yaml asks an operator to set before applying.
const (
	placeholderServer = "https://control-plane.invalid:6443"
	placeholderCIDR   = `clusterCIDR: ""`
	// The run serves /metrics to the host (--metrics-out), as its kube-proxy does.
	localMetrics = "metricsBindAddress: 127.0.0.1:10249"
	runMetrics   = "metricsBindAddress: 0.0.0.0:10249"
)

// overlay writes a kustomization over the repository's deploy/ that does what its comments ask
// of an operator: the apiserver address and the pod CIDR in the ConfigMap, and the image
// that was imported into containerd.
func (r *runner) overlay() (string, error) {
	c := r.cfg
	dir := filepath.Join(c.State, "deploy")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	b, err := os.ReadFile(filepath.Join(c.Repo, "deploy", "base", "configmap.yaml"))
	if err != nil {
		return "", err
	}
	var cm corev1.ConfigMap
	if err := yaml.Unmarshal(b, &cm); err != nil {
		return "", fmt.Errorf("deploy/base/configmap.yaml: %w", err)
	}
	conf, kc := cm.Data["config.conf"], cm.Data["kubeconfig.conf"]
	if !strings.Contains(kc, placeholderServer) || !strings.Contains(conf, placeholderCIDR) || !strings.Contains(conf, localMetrics) {
		return "", fmt.Errorf("deploy/base/configmap.yaml no longer holds %q in kubeconfig.conf and %q and %q in config.conf: update e2e/node", placeholderServer, placeholderCIDR, localMetrics)
	}
	cm.Data["kubeconfig.conf"] = strings.ReplaceAll(kc, placeholderServer, r.server())
	conf = strings.ReplaceAll(conf, placeholderCIDR, "clusterCIDR: "+c.PodCIDR)
	cm.Data["config.conf"] = strings.ReplaceAll(conf, localMetrics, runMetrics)
	patch := map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": cm.Name, "namespace": cm.Namespace},
		"data":     cm.Data,
	}
	pb, err := yaml.Marshal(patch)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "configmap-patch.yaml"), pb, 0o644); err != nil {
		return "", err
	}
	rel, err := filepath.Rel(dir, filepath.Join(c.Repo, "deploy"))
	if err != nil {
		return "", err
	}
	name, tag, ok := strings.Cut(c.KipvsImage, ":")
	if !ok {
		return "", fmt.Errorf("kipvs image %q has no tag", c.KipvsImage)
	}
	k := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- %s
images:
- name: ghcr.io/kipvs/kipvs
  newName: %s
  newTag: %s
patches:
- path: configmap-patch.yaml
`, rel, name, tag)
	if b := c.filterBackend(); b != "" {
		// The flag, appended to the kipvs container's command as an operator would.
		k += fmt.Sprintf(`- target:
    kind: DaemonSet
    name: kipvs
  patch: |-
    - op: add
      path: /spec/template/spec/containers/0/command/-
      value: --kipvs-filter-backend=%s
`, b)
	}
	return dir, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644)
}

// chartValues is the values file the run installs charts/kipvs with: what the overlay sets
// in deploy/, through the chart's values.
func (r *runner) chartValues() ([]byte, error) {
	u, err := url.Parse(r.server())
	if err != nil {
		return nil, fmt.Errorf("apiserver URL %q: %w", r.server(), err)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		return nil, fmt.Errorf("apiserver URL %q has no port: %w", r.server(), err)
	}
	name, tag, ok := strings.Cut(r.cfg.KipvsImage, ":")
	if !ok {
		return nil, fmt.Errorf("kipvs image %q has no tag", r.cfg.KipvsImage)
	}
	return yaml.Marshal(map[string]any{
		"image":              map[string]any{"repository": name, "tag": tag},
		"apiServer":          map[string]any{"host": u.Hostname(), "port": port},
		"clusterCIDR":        r.cfg.PodCIDR,
		"metricsBindAddress": "0.0.0.0:10249",
		"filterBackend":      cmp.Or(r.cfg.filterBackend(), "iptables"),
	})
}

// renderChart renders charts/kipvs with helm template (on the host: helm never talks to the
// cluster) into a manifest file for kubectl.
func (r *runner) renderChart(ctx context.Context) (string, error) {
	dir := filepath.Join(r.cfg.State, "chart")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	values, err := r.chartValues()
	if err != nil {
		return "", err
	}
	vf := filepath.Join(dir, "values.yaml")
	if err := os.WriteFile(vf, values, 0o644); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.cfg.Helm, "template", "kipvs", filepath.Join(r.cfg.Repo, "charts", "kipvs"),
		"--namespace", "kube-system", "--values", vf)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("helm template charts/kipvs: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	mf := filepath.Join(dir, "kipvs.yaml")
	return mf, os.WriteFile(mf, out, 0o644)
}

// deployKipvs applies deploy/ (through the overlay) or, with Config.Helm, charts/kipvs
// rendered by helm template, with kubectl, and waits for the DaemonSet's pod on the node to
// be Ready: the kubelet started it with the manifests' securityContext, mounts, probes and
// RBAC, from the imported image.
func (r *runner) deployKipvs(ctx context.Context) error {
	var args []string
	what := "deploy/"
	if r.cfg.Helm != "" {
		mf, err := r.renderChart(ctx)
		if err != nil {
			return err
		}
		args, what = []string{"apply", "--server-side", "-f", mf}, "charts/kipvs (helm template)"
	} else {
		dir, err := r.overlay()
		if err != nil {
			return err
		}
		args = []string{"apply", "--server-side", "-k", dir}
	}
	out, err := r.kubectlRun(ctx, time.Minute, nil, args...)
	if err != nil {
		return err
	}
	r.logf("applied %s:\n%s", what, strings.TrimSpace(out))
	return r.waitPodsReady(ctx, 4*time.Minute, "kube-system", "app.kubernetes.io/name=kipvs", len(r.nodes))
}

// waitPodsReady waits until n pods match selector and all are Ready; the detail is each
// pod's phase and its containers' states.
func (r *runner) waitPodsReady(ctx context.Context, limit time.Duration, ns, selector string, n int) error {
	what := fmt.Sprintf("%d pod(s) %s in %s Ready", n, selector, ns)
	r.logf("waiting up to %s for %s", limit, what)
	var stop error
	_, err := poll.Wait(limit, what, func() (bool, string) {
		if stop = r.vmEnded(); stop != nil {
			return true, ""
		}
		if stop = r.cl.Exited(); stop != nil {
			return true, ""
		}
		out, err := r.kubectlRun(ctx, 10*time.Second, nil, "get", "pods", "-n", ns, "-l", selector, "-o",
			`jsonpath={range .items[*]}{.metadata.name} {.status.phase} ready={.status.conditions[?(@.type=="Ready")].status} {range .status.containerStatuses[*]}{.state}{end};{end}`)
		if err != nil {
			return false, err.Error()
		}
		out = strings.TrimSpace(out)
		// An image that is not in containerd never will be: there is no registry to pull from.
		if strings.Contains(out, "ErrImageNeverPull") || strings.Contains(out, "ErrImagePull") {
			stop = fmt.Errorf("an image is not imported into containerd (give its archive with --image): %s", out)
			return true, ""
		}
		pods := strings.Split(strings.TrimSuffix(out, ";"), ";")
		if out == "" {
			return false, "no pod yet"
		}
		if len(pods) < n {
			return false, out
		}
		for _, p := range pods {
			if !strings.Contains(p, "ready=True") {
				return false, out
			}
		}
		return true, out
	})
	if stop != nil {
		return stop
	}
	return err
}
