package node

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/kipvs/kipvs/e2e/cluster"
)

//go:embed node.sh
var nodeScript string

// Config describes one node run. Paths may be relative to the working directory (the
// repository root).
type Config struct {
	Repo     string // repository root: deploy/ is applied from there
	K8sBin   string // etcd, kube-apiserver (make e2e-bins)
	NodeBin  string // kubelet, kube-controller-manager, kube-scheduler, kubectl (make node-bins)
	NodePkgs string // e2e/node/prepare.sh's cache (containerd, runc, CNI plugins)
	VMCache  string // e2e/vm/prepare.sh's cache
	State    string // state directory, removed first; inside the tree the VM sees

	Images     []string // OCI archives imported into containerd before the kubelet starts
	KipvsImage string   // the kipvs image's name:tag in Images (the DaemonSet's image becomes it)
	EchoImage  string   // an image in Images with /echo (e2e/echo), for the smoke's pods
	PauseImage string   // containerd's sandbox image, in Images
	// Helm, when set, is a helm binary: kipvs is installed from charts/kipvs (helm template
	// on the host, applied with kubectl) rather than from deploy/'s kustomization.
	Helm string
	// Proxy is the service proxy deployed: "kipvs" (deploy/, the default) or "kube-proxy"
	// (kubeadm's DaemonSet, e2e/node/manifests/kube-proxy.yaml, from KubeProxyImage).
	Proxy          string
	KubeProxyImage string // kube-proxy's image name:tag in Images
	// MetricsOut, when set, is where the proxy's /metrics (from the host, NODE_IP:10249) is
	// saved at the end of the run.
	MetricsOut string
	// CorednsImage, when set, is CoreDNS's image in Images: kube-dns is applied after the
	// proxy (dns.go) and resolved from a pod after the smoke.
	CorednsImage string

	// Tap is the host's end of the link: the tap device with one node; with more, the bridge
	// that the nodes' taps (Tap-1, Tap-2, ...) join.
	Tap    string
	HostIP net.IP // host end of the link; the apiserver listens and advertises here
	NodeIP net.IP // the first node's InternalIP; the others follow it
	Prefix int    // of the link's subnet
	// PodCIDR is the cluster's pod network (default DefaultPodCIDR); node i gets its i-th /24,
	// routed from the host (and the other nodes) to the node: runs at the same time on one
	// machine need different ones.
	PodCIDR  string
	NodeName string // the first node's name; the others are numbered like it (node-2, ...)
	// Nodes is how many nodes (VMs) the cluster has, 1 (the default) to MaxNodes.
	Nodes    int
	MemoryMB int
	CPUs     int
	Timeout  time.Duration // the whole run
	// Until, when set, ends the run after that step: "node" (Ready), "kipvs" (the DaemonSet
	// pod Ready); empty runs the smoke too.
	Until string
	// Hold keeps the cluster up after the last step until the run is interrupted or its
	// Timeout ends, and prints how to reach it (kubectl with the admin kubeconfig), so a
	// failing test can be looked at by hand.
	Hold bool
	// Suite, when set, runs upstream's e2e suite after the smoke (make conformance).
	Suite *Suite

	Log io.Writer // progress lines
}

// Defaults for Config's network and sizes.
const (
	DefaultTap      = "kipvs-node0"
	DefaultNodeName = "node-1"
	DefaultPodCIDR  = "10.244.0.0/16"
	ServiceCIDR     = "10.96.0.0/16"
	ClusterDNS      = "10.96.0.10"
)

// Phase is one timed step of a run.
type Phase struct {
	Name    string
	Elapsed time.Duration
}

// Report is what a run measured and saw.
type Report struct {
	Phases []Phase
	Pods   string // kubectl get pods -A -o wide, at the end
	IPVS   string // the IPVS table, as IPVSCommand printed it
	Answer string // the smoke's answers
	VM     string // the node script's output
	// IPVSCommand: kipvs status -Ln in kipvs's pod, or /proc/net/ip_vs in kube-proxy's.
	IPVSCommand string
}

// runner holds one run's state.
type runner struct {
	cfg       Config
	rep       *Report
	link      *Link
	pki       *PKI
	cl        *cluster.Cluster
	kubectl   string
	admin     string // admin kubeconfig path
	serverURL string
	nodes     []*vmNode
}

// Run brings the cluster up, runs the smoke and tears everything down. The error names the
// step that failed; the report holds what was measured up to there.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Timeout == 0 {
		cfg.Timeout = 20 * time.Minute
	}
	if cfg.PodCIDR == "" {
		cfg.PodCIDR = DefaultPodCIDR
	}
	if cfg.Nodes == 0 {
		cfg.Nodes = 1
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	r := &runner{cfg: cfg, rep: &Report{}}
	nodes, err := planNodes(cfg)
	if err != nil {
		return r.rep, fmt.Errorf("step %q: %w", "preflight", err)
	}
	r.nodes = nodes
	defer r.teardown()
	steps := []step{
		{"preflight", r.preflight, ""},
		{"link", r.linkUp, ""},
		{"control plane", r.controlPlane, ""},
		{nodeReadyStep(len(nodes)), r.nodeUp, "node"},
		{cfg.proxyName() + " DaemonSet Ready", r.deployProxy, "kipvs"},
		{stepKubeDNS, r.deployKubeDNS, ""},
		{"Service answers", r.smoke, ""},
		{stepDNS, r.dnsCheck, ""},
	}
	if cfg.Suite != nil {
		steps = append(steps, step{"suite", r.runSuite, ""})
	}
	if cfg.MetricsOut != "" {
		steps = append(steps, step{stepMetrics, r.saveMetrics, ""})
	}
	switch cfg.Until {
	case "", "node", "kipvs":
	default:
		return r.rep, fmt.Errorf("until %q: want node or kipvs", cfg.Until)
	}
	if cfg.Proxy != "" && !slices.Contains(proxies, cfg.Proxy) {
		return r.rep, fmt.Errorf("proxy %q: want one of %s", cfg.Proxy, strings.Join(proxies, ", "))
	}
	proxyUp := false // the proxy's DaemonSet was Ready: its /metrics can be saved
	for _, s := range steps {
		if !r.wantStep(s.name) {
			continue
		}
		r.logf("step %q", s.name)
		start := time.Now()
		err := s.fn(ctx)
		r.rep.Phases = append(r.rep.Phases, Phase{s.name, time.Since(start)})
		if err != nil {
			r.logf("step %q FAILED after %s: %v", s.name, time.Since(start).Round(100*time.Millisecond), err)
			r.diagnose()
			if proxyUp && cfg.MetricsOut != "" && s.name != stepMetrics {
				if err := r.saveMetrics(ctx); err != nil { // the figures of a failed run still count
					r.logf("metrics not saved: %v", err)
				}
			}
			return r.rep, fmt.Errorf("step %q: %w", s.name, err)
		}
		r.logf("step %q done in %s", s.name, time.Since(start).Round(100*time.Millisecond))
		proxyUp = proxyUp || s.until == "kipvs"
		if s.until != "" && s.until == cfg.Until {
			r.rep.Pods, _ = r.kubectlRun(ctx, 20*time.Second, nil, "get", "pods", "-A", "-o", "wide")
			break
		}
	}
	if cfg.Hold {
		r.hold(ctx)
	}
	return r.rep, nil
}

// hold waits, with the cluster up, until ctx ends (an interrupt or the run's timeout).
func (r *runner) hold(ctx context.Context) {
	deadline, _ := ctx.Deadline()
	r.logf("holding the cluster until interrupted (or %s): %s --kubeconfig %s get pods -A",
		deadline.UTC().Format("15:04:05"), filepath.Join(r.cfg.NodeBin, "kubectl"), r.admin)
	<-ctx.Done()
	r.logf("hold ended: %v", context.Cause(ctx))
}

// stepMetrics is the step that saves the proxy's /metrics (Config.MetricsOut).
const stepMetrics = "metrics saved"

// step is one named, timed step of a run; until names the Config.Until value that ends the
// run after it.
type step struct {
	name  string
	fn    func(context.Context) error
	until string
}

func (r *runner) logf(format string, args ...any) {
	if r.cfg.Log != nil {
		fmt.Fprintf(r.cfg.Log, "noderun: %s "+format+"\n", append([]any{time.Now().UTC().Format("15:04:05")}, args...)...)
	}
}

func (r *runner) preflight(ctx context.Context) error {
	c := &r.cfg
	for _, p := range []*string{&c.Repo, &c.K8sBin, &c.NodeBin, &c.NodePkgs, &c.VMCache, &c.State} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			return err
		}
		*p = abs
	}
	for i, img := range c.Images {
		abs, err := filepath.Abs(img)
		if err != nil {
			return err
		}
		if _, err := os.Stat(abs); err != nil {
			return fmt.Errorf("image archive: %w", err)
		}
		c.Images[i] = abs
	}
	var missing []string
	for _, f := range []string{
		filepath.Join(c.K8sBin, "etcd"), filepath.Join(c.K8sBin, "kube-apiserver"),
		filepath.Join(c.NodeBin, "kubelet"), filepath.Join(c.NodeBin, "kube-controller-manager"),
		filepath.Join(c.NodeBin, "kube-scheduler"), filepath.Join(c.NodeBin, "kubectl"),
	} {
		if _, err := os.Stat(f); err != nil {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("binaries not built (make e2e-bins node-bins): %s", strings.Join(missing, ", "))
	}
	if c.Helm != "" {
		if _, err := os.Stat(c.Helm); err != nil {
			return fmt.Errorf("helm (make helm): %w", err)
		}
	}
	cur, err := os.ReadFile(filepath.Join(c.NodePkgs, "current"))
	if err != nil {
		return fmt.Errorf("node packages not extracted (e2e/node/prepare.sh %s): %w", c.NodePkgs, err)
	}
	c.NodePkgs = filepath.Join(c.NodePkgs, strings.TrimSpace(string(cur)), "root")
	if os.Geteuid() != 0 {
		return errors.New("the node's tap device needs root")
	}
	if c.PauseImage == "" || (c.Until != "node" && c.KipvsImage == "" && c.isKipvs()) || (c.Until == "" && c.EchoImage == "") {
		return errors.New("the pause, kipvs and echo image names are needed (--pause-image, --kipvs-image, --echo-image)")
	}
	if c.Until != "node" && c.proxyName() == ProxyKubeProxy && c.KubeProxyImage == "" {
		return errors.New("--proxy kube-proxy needs kube-proxy's image name (--kube-proxy-image) and its archive (--image)")
	}
	if c.MetricsOut != "" {
		abs, err := filepath.Abs(c.MetricsOut)
		if err != nil {
			return err
		}
		c.MetricsOut = abs
	}
	r.kubectl = filepath.Join(c.NodeBin, "kubectl")
	return r.preflightSuite()
}

func (r *runner) linkUp(ctx context.Context) error {
	c := r.cfg
	r.link = &Link{Name: c.Tap, HostIP: c.HostIP, Prefix: c.Prefix}
	var desc []string
	for _, n := range r.nodes {
		r.link.Taps = append(r.link.Taps, n.tap)
		r.link.Routes = append(r.link.Routes, Route{CIDR: n.podCIDR, Via: n.ip})
		desc = append(desc, fmt.Sprintf("%s %s (pod CIDR %s routed to it)", n.name, n.ip, n.podCIDR))
	}
	if err := r.link.Up(); err != nil {
		r.link = nil
		return err
	}
	what := "tap " + c.Tap
	if r.link.bridged() {
		what = fmt.Sprintf("bridge %s with taps %s", c.Tap, strings.Join(r.link.Taps, ", "))
	}
	r.logf("%s: host %s/%d, %s; nothing forwarded beyond", what, c.HostIP, c.Prefix, strings.Join(desc, ", "))
	// The link is the run's lock: only its holder clears the state directory.
	_ = os.RemoveAll(c.State)
	return os.MkdirAll(c.State, 0o755)
}

// nodeReadyStep names the step that boots the nodes.
func nodeReadyStep(n int) string {
	if n == 1 {
		return "node Ready"
	}
	return fmt.Sprintf("%d nodes Ready", n)
}

func (r *runner) teardown() {
	var stopping []*vmNode
	for _, n := range r.nodes {
		if n.stop != nil {
			close(n.stop)
			n.stop = nil
			stopping = append(stopping, n)
		}
	}
	limit := time.After(60 * time.Second)
	for _, n := range stopping {
		select {
		case err := <-n.done:
			if err != nil {
				r.logf("VM %s: %v", n.name, err)
			}
			for _, l := range strings.Split(n.output, "\n") {
				if strings.Contains(l, "node: ") && strings.Contains(l, " stop: ") {
					r.logf("VM %s%s", r.nodeLabel(n), strings.TrimSpace(l))
				}
			}
		case <-limit:
			r.logf("VM %s did not stop within 60s of the stop request: killing it", n.name)
			n.cancel()
			select {
			case <-n.done:
			case <-time.After(15 * time.Second):
				r.logf("VM %s still running 15s after the kill", n.name)
			}
		}
	}
	var outputs []string
	for _, n := range r.nodes {
		if n.cancel != nil {
			n.cancel()
		}
		if n.output != "" {
			outputs = append(outputs, "=== "+n.name+"\n"+n.output)
		}
	}
	if len(r.nodes) == 1 && len(outputs) == 1 {
		r.rep.VM = r.nodes[0].output
	} else {
		r.rep.VM = strings.Join(outputs, "\n")
	}
	if r.cl != nil {
		r.cl.Stop()
	}
	if r.link != nil {
		r.link.Down()
		r.logf("link %s removed", r.link.Name)
	}
}

// kubectlRun runs kubectl with the admin kubeconfig, bounded by limit.
func (r *runner) kubectlRun(ctx context.Context, limit time.Duration, stdin []byte, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.kubectl, append([]string{"--kubeconfig", r.admin}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// diagnose logs what helps after a failed step: the pods and the recent events.
func (r *runner) diagnose() {
	if r.cl == nil || r.admin == "" {
		return
	}
	ctx := context.Background()
	for _, args := range [][]string{
		{"get", "nodes", "-o", "wide"},
		{"get", "pods", "-A", "-o", "wide"},
		{"get", "events", "-A", "--sort-by", ".lastTimestamp"},
		{"logs", "-n", "kube-system", "-l", r.cfg.proxySelector(), "--tail", "80"},
	} {
		out, _ := r.kubectlRun(ctx, 20*time.Second, nil, args...)
		r.logf("kubectl %s:\n%s", strings.Join(args, " "), out)
	}
	for _, n := range r.nodes {
		if n.out != nil {
			r.logf("VM %s output so far:\n%s", n.name, tailLines(n.out.String(), 40))
		}
	}
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// server is the apiserver's URL, as the host, the node and pods reach it.
func (r *runner) server() string { return r.serverURL }
