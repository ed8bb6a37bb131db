package harness

import (
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
)

// Addresses of the scenario topology.
var (
	// NodeIP is the VM's eth0 address, the Node's InternalIP.
	NodeIP = netip.MustParseAddr("10.0.2.15")
	// PodGateway is the node's address on the pod bridge (and what pods see as the source
	// of masqueraded traffic from the node).
	PodGateway = netip.MustParsePrefix("10.244.0.1/24")
	// NodePodCIDR is the Node's spec.podCIDRs[0]; ClusterCIDR is --cluster-cidr.
	NodePodCIDR = netip.MustParsePrefix("10.244.0.0/24")
	ClusterCIDR = netip.MustParsePrefix("10.244.0.0/16")
	// ServiceCIDR is the apiserver's --service-cluster-ip-range.
	ServiceCIDR = netip.MustParsePrefix("10.96.0.0/16")
	// ExternalNet links the external client (ExternalClientIP) to the node (ExternalNodeIP).
	ExternalNodeIP   = netip.MustParsePrefix("192.168.100.1/24")
	ExternalClientIP = netip.MustParsePrefix("192.168.100.2/24")
	// PublicNet holds externalIPs and LoadBalancer ingress IPs (TEST-NET-3).
	PublicNet = netip.MustParsePrefix("203.0.113.0/24")
)

const (
	// NodeName is the Node object kipvs runs as (--hostname-override).
	NodeName = "node-a"
	// Namespace holds every object a scenario creates (namespaces cannot be deleted
	// without kube-controller-manager, which the e2e cluster does not run).
	Namespace = "default"
	// EchoPort is where every pod's echo backend listens, TCP and UDP.
	EchoPort = 8080
	// MetricsAddr is kipvs's --metrics-bind-address in the scenarios.
	MetricsAddr = "127.0.0.1:10249"
	// HealthAddr is kipvs's --healthz-bind-address in the scenarios.
	HealthAddr = "127.0.0.1:10256"
)

// Env is what e2erun passes to the tests.
type Env struct {
	Kubeconfig string // KIPVS_E2E_KUBECONFIG: kubeconfig for the apiserver as the VM sees it
	KipvsBin   string // KIPVS_BIN: the kipvs binary
	EchoBin    string // KIPVS_ECHO_BIN: the echo backend (e2e/echo)
	// KubeProxyBin is KIPVS_KUBE_PROXY_BIN, kube-proxy v1.34.10 built from e2e/k8s (make
	// e2e-bins), as the host path; RequireKubeProxy stages it.
	KubeProxyBin string
}

// RequireKubeProxy fails the test when KIPVS_KUBE_PROXY_BIN is not set or missing, and
// otherwise returns the path of its copy in StageDir.
func (e Env) RequireKubeProxy(t testing.TB) string {
	t.Helper()
	if e.KubeProxyBin == "" {
		t.Fatal("KIPVS_KUBE_PROXY_BIN is not set: run the scenarios through make test-e2e, which builds kube-proxy (make e2e-bins)")
	}
	p, err := stage(e.KubeProxyBin, "kube-proxy")
	if err != nil {
		t.Fatalf("KIPVS_KUBE_PROXY_BIN: %v", err)
	}
	return p
}

// StageDir is where LoadEnv copies the binaries: a tmpfs in the VM. Executing a binary from
// the host's root (9p, uncached) costs seconds under TCG; from tmpfs a fraction of that.
const StageDir = "/run/kipvs-e2e"

// LoadEnv reads the environment, fails the test when something is missing, and stages the
// kipvs and echo binaries in StageDir (copied once per VM run; the returned Env names the
// copies).
func LoadEnv(t testing.TB) Env {
	t.Helper()
	e := Env{
		Kubeconfig: os.Getenv("KIPVS_E2E_KUBECONFIG"),
		KipvsBin:   os.Getenv("KIPVS_BIN"),
		EchoBin:    os.Getenv("KIPVS_ECHO_BIN"),

		KubeProxyBin: os.Getenv("KIPVS_KUBE_PROXY_BIN"),
	}
	for name, v := range map[string]string{"KIPVS_E2E_KUBECONFIG": e.Kubeconfig, "KIPVS_BIN": e.KipvsBin, "KIPVS_ECHO_BIN": e.EchoBin} {
		if v == "" {
			t.Fatalf("%s is not set: run the scenarios through make test-e2e (e2erun)", name)
		}
		if _, err := os.Stat(v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if os.Getenv("KIPVS_IN_VM") != "1" {
		t.Fatal("the e2e scenarios change the network configuration of the machine they run on: run them in the VM (make test-e2e)")
	}
	var err error
	if e.KipvsBin, err = stage(e.KipvsBin, "kipvs"); err != nil {
		t.Fatal(err)
	}
	if e.EchoBin, err = stage(e.EchoBin, "echo"); err != nil {
		t.Fatal(err)
	}
	return e
}

// stage copies src to StageDir/name unless a copy with the same size and modification time
// is there already, and returns the copy's path.
func stage(src, name string) (string, error) {
	dst := filepath.Join(StageDir, name)
	si, err := os.Stat(src)
	if err != nil {
		return "", err
	}
	if di, err := os.Stat(dst); err == nil && di.Size() == si.Size() && di.ModTime().Equal(si.ModTime()) {
		return dst, nil
	}
	if err := os.MkdirAll(StageDir, 0o755); err != nil {
		return "", fmt.Errorf("stage %s: %w", src, err)
	}
	in, err := os.Open(src)
	if err != nil {
		return "", fmt.Errorf("stage %s: %w", src, err)
	}
	defer in.Close()
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
	if err != nil {
		return "", fmt.Errorf("stage %s: %w", src, err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return "", fmt.Errorf("stage %s: copy to %s: %w", src, tmp, err)
	}
	if err := out.Close(); err != nil {
		return "", fmt.Errorf("stage %s: %w", src, err)
	}
	if err := os.Chtimes(tmp, si.ModTime(), si.ModTime()); err != nil {
		return "", fmt.Errorf("stage %s: %w", src, err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return "", fmt.Errorf("stage %s: %w", src, err)
	}
	return dst, nil
}
