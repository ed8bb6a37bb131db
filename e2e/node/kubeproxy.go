package node

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/kipvs/kipvs/internal/testutil/poll"
)

// The proxies a node run can deploy (Config.Proxy).
const (
	ProxyKipvs     = "kipvs"
	ProxyKubeProxy = "kube-proxy"
	// ProxyKipvsNFTables is kipvs from deploy/ (or the chart) with its nftables filter
	// backend (--kipvs-filter-backend=nftables).
	ProxyKipvsNFTables = "kipvs-nftables"
)

// proxies are the values of Config.Proxy.
var proxies = []string{ProxyKipvs, ProxyKipvsNFTables, ProxyKubeProxy}

// Ports of both proxies' HTTP servers on the node (healthzBindAddress, metricsBindAddress).
const (
	healthzPort = "10256"
	metricsPort = "10249"
)

// kubeProxyManifest is kube-proxy's DaemonSet and its objects as kubeadm v1.34 makes them.
//
//go:embed manifests/kube-proxy.yaml
var kubeProxyManifest string

// kubeProxyValues fill in kubeProxyManifest.
type kubeProxyValues struct {
	ControlPlaneEndpoint string // the apiserver's URL, as the node reaches it
	ClusterCIDR          string // the pod network (the node's pod CIDRs are in it)
	Image                string // kube-proxy's image, imported into containerd
}

// renderKubeProxy is the manifest with v filled in; a missing value is an error.
func renderKubeProxy(v kubeProxyValues) ([]byte, error) {
	if v.ControlPlaneEndpoint == "" || v.ClusterCIDR == "" || v.Image == "" {
		return nil, fmt.Errorf("kube-proxy manifest: the apiserver URL, the cluster CIDR and the image are all needed (got %+v)", v)
	}
	t, err := template.New("kube-proxy.yaml").Option("missingkey=error").Parse(kubeProxyManifest)
	if err != nil {
		return nil, fmt.Errorf("e2e/node/manifests/kube-proxy.yaml: %w", err)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, v); err != nil {
		return nil, fmt.Errorf("e2e/node/manifests/kube-proxy.yaml: %w", err)
	}
	return b.Bytes(), nil
}

// proxyName is the proxy the run deploys.
func (c Config) proxyName() string {
	if c.Proxy == "" {
		return ProxyKipvs
	}
	return c.Proxy
}

// isKipvs reports whether the run deploys kipvs (with either filter backend).
func (c Config) isKipvs() bool { return c.proxyName() != ProxyKubeProxy }

// filterBackend is the --kipvs-filter-backend the run's kipvs is given; "" for the default.
func (c Config) filterBackend() string {
	if c.proxyName() == ProxyKipvsNFTables {
		return "nftables"
	}
	return ""
}

// proxySelector selects the proxy's pods.
func (c Config) proxySelector() string {
	if c.proxyName() == ProxyKubeProxy {
		return "k8s-app=kube-proxy"
	}
	return "app.kubernetes.io/name=kipvs"
}

// deployProxy deploys the run's proxy and waits until it serves.
func (r *runner) deployProxy(ctx context.Context) error {
	if r.cfg.proxyName() == ProxyKubeProxy {
		return r.deployKubeProxy(ctx)
	}
	return r.deployKipvs(ctx)
}

// deployKubeProxy applies kubeadm's kube-proxy objects and waits for its pod Running, its
// /healthz answering 200 from the host and its first sync done: kubeadm's DaemonSet has no
// readiness probe, so the pod is Ready as soon as it runs, before kube-proxy has synced.
func (r *runner) deployKubeProxy(ctx context.Context) error {
	m, err := renderKubeProxy(kubeProxyValues{ControlPlaneEndpoint: r.server(), ClusterCIDR: r.cfg.PodCIDR, Image: r.cfg.KubeProxyImage})
	if err != nil {
		return err
	}
	out, err := r.kubectlRun(ctx, time.Minute, m, "apply", "--server-side", "-f", "-")
	if err != nil {
		return err
	}
	r.logf("applied e2e/node/manifests/kube-proxy.yaml:\n%s", strings.TrimSpace(out))
	if err := r.waitPodsReady(ctx, 4*time.Minute, "kube-system", r.cfg.proxySelector(), len(r.nodes)); err != nil {
		return err
	}
	url := "http://" + net.JoinHostPort(r.cfg.NodeIP.String(), healthzPort) + "/healthz"
	client := &http.Client{Timeout: 5 * time.Second}
	_, err = poll.Wait(2*time.Minute, "GET "+url+" from the host answering 200", func() (bool, string) {
		resp, err := client.Get(url)
		if err != nil {
			return false, err.Error()
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		detail := fmt.Sprintf("%s: %s", resp.Status, strings.TrimSpace(string(b)))
		return resp.StatusCode == http.StatusOK, detail
	})
	if err != nil {
		return err
	}
	r.logf("%s answers 200", url)
	// /healthz is 200 from the start, before the first sync; under TCG that sync takes
	// minutes (every ipset and iptables change is a program run). Its end is when kube-proxy
	// first sets kubeproxy_sync_proxy_rules_last_timestamp_seconds.
	murl := "http://" + net.JoinHostPort(r.cfg.NodeIP.String(), metricsPort) + "/metrics"
	const synced = `kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4"}`
	_, err = poll.Wait(5*time.Minute, "kube-proxy's first IPv4 sync ("+synced+" in "+murl+")", func() (bool, string) {
		resp, err := client.Get(murl)
		if err != nil {
			return false, err.Error()
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return false, err.Error()
		}
		return strings.Contains(string(b), synced), resp.Status
	})
	if err != nil {
		return err
	}
	r.logf("kube-proxy synced (%s set)", synced)
	return nil
}

// ipvsTable is the node's IPVS table as the proxy's pod shows it: kipvs status -Ln in kipvs's;
// the kernel's /proc/net/ip_vs (addresses in hex) in kube-proxy's, whose image has no ipvsadm.
func (r *runner) ipvsTable(ctx context.Context) {
	args := []string{"exec", "-n", "kube-system", "daemonset/kipvs", "--", "/usr/local/bin/kipvs", "status", "-Ln"}
	if r.cfg.proxyName() == ProxyKubeProxy {
		args = []string{"exec", "-n", "kube-system", "daemonset/kube-proxy", "--", "cat", "/proc/net/ip_vs"}
	}
	r.rep.IPVSCommand = "kubectl " + strings.Join(args, " ")
	out, err := r.kubectlRun(ctx, 30*time.Second, nil, args...)
	if err != nil {
		r.logf("IPVS table: %v", err)
		return
	}
	r.rep.IPVS = out
	if r.cfg.proxyName() == ProxyKubeProxy {
		if t, err := formatProcIPVS(out); err == nil {
			r.rep.IPVS = t
		} else {
			r.logf("IPVS table: /proc/net/ip_vs: %v", err)
		}
	}
}

// saveMetrics writes the proxy's /metrics, requested from the host on the node's
// metricsBindAddress (0.0.0.0:10249 for both proxies in these runs), to Config.MetricsOut.
//
// The save outlives the run's own deadline by up to metricsSaveWait (a suite that used all of
// its time still leaves its proxy's figures), and a loaded node gets three tries.
func (r *runner) saveMetrics(ctx context.Context) error {
	url := "http://" + net.JoinHostPort(r.cfg.NodeIP.String(), metricsPort) + "/metrics"
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), metricsSaveWait)
	defer cancel()
	var b []byte
	var err error
	for try := 1; try <= 3; try++ {
		if b, err = getMetrics(ctx, url); err == nil {
			break
		}
		r.logf("%s's /metrics, try %d of 3: %v", r.cfg.proxyName(), try, err)
	}
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(r.cfg.MetricsOut), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(r.cfg.MetricsOut, b, 0o644); err != nil {
		return err
	}
	r.logf("%s's %s saved to %s (%d bytes)", r.cfg.proxyName(), url, r.cfg.MetricsOut, len(b))
	return nil
}

// formatProcIPVS turns the kernel's /proc/net/ip_vs (hex addresses and ports) into ipvsadm
// -Ln's layout, IPv4 only (the node cluster is single-stack).
func formatProcIPVS(s string) (string, error) {
	var b strings.Builder
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "IP Virtual Server") {
		return "", errors.New("not /proc/net/ip_vs")
	}
	b.WriteString(lines[0] + "\n")
	b.WriteString("Prot LocalAddress:Port Scheduler Flags\n  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn\n")
	for _, l := range lines[3:] {
		f := strings.Fields(l)
		switch {
		case len(f) >= 3 && (f[0] == "TCP" || f[0] == "UDP" || f[0] == "SCTP"):
			a, err := hexAddrPort(f[1])
			if err != nil {
				return "", err
			}
			fmt.Fprintf(&b, "%-4s %s %s", f[0], a, f[2])
			if len(f) > 3 {
				b.WriteString(" " + strings.Join(f[3:], " "))
			}
			b.WriteString("\n")
		case len(f) == 6 && f[0] == "->":
			a, err := hexAddrPort(f[1])
			if err != nil {
				return "", err
			}
			fmt.Fprintf(&b, "  -> %-28s %-7s %-6s %-10s %s\n", a, f[2], f[3], f[4], f[5])
		case len(f) == 0:
		default:
			return "", fmt.Errorf("line %q: unknown", l)
		}
	}
	return b.String(), nil
}

// hexAddrPort turns /proc/net/ip_vs's "0A600001:01BB" into "10.96.0.1:443".
func hexAddrPort(s string) (string, error) {
	h, p, ok := strings.Cut(s, ":")
	if !ok || len(h) != 8 {
		return "", fmt.Errorf("address %q: want 8 hex digits:port", s)
	}
	a, err := strconv.ParseUint(h, 16, 32)
	if err != nil {
		return "", fmt.Errorf("address %q: %w", s, err)
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return "", fmt.Errorf("address %q: port: %w", s, err)
	}
	ip := net.IPv4(byte(a>>24), byte(a>>16), byte(a>>8), byte(a))
	return net.JoinHostPort(ip.String(), strconv.FormatUint(port, 10)), nil
}

// metricsSaveWait bounds saveMetrics, past the run's own deadline if need be.
const metricsSaveWait = 2 * time.Minute

// getMetrics is one GET of a proxy's /metrics, bounded to 30 s.
func getMetrics(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if len(b) == 0 {
		return nil, fmt.Errorf("GET %s: empty body", url)
	}
	return b, nil
}
