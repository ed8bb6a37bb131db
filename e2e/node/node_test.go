package node

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatalf("%s: no PEM block", path)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The apiserver's certificate verifies for the addresses pods and the node use; a client
// certificate carries the identity the Node authorizer and RBAC read.
func TestPKIIssuesVerifiableCertificates(t *testing.T) {
	p, err := NewPKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	host := net.ParseIP("192.168.123.1")
	if err := p.Issue(CertSpec{Name: "apiserver", CN: "kube-apiserver", Server: true,
		DNS: []string{"kubernetes.default.svc"}, IPs: []net.IP{host, serviceIP}}); err != nil {
		t.Fatal(err)
	}
	if err := p.Issue(CertSpec{Name: "kubelet", CN: "system:node:node-1", Orgs: []string{"system:nodes"}, Client: true}); err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(readCert(t, p.Cert("ca")))
	srv := readCert(t, p.Cert("apiserver"))
	for _, name := range []string{"192.168.123.1", "10.96.0.1", "kubernetes.default.svc"} {
		if _, err := srv.Verify(x509.VerifyOptions{Roots: roots, DNSName: name}); err != nil {
			t.Errorf("apiserver certificate for %s: %v", name, err)
		}
	}
	if _, err := srv.Verify(x509.VerifyOptions{Roots: roots, DNSName: "192.168.123.9"}); err == nil {
		t.Error("apiserver certificate verifies for an address it was not issued for")
	}
	cl := readCert(t, p.Cert("kubelet"))
	if _, err := cl.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("kubelet client certificate: %v", err)
	}
	if cl.Subject.CommonName != "system:node:node-1" || strings.Join(cl.Subject.Organization, ",") != "system:nodes" {
		t.Errorf("kubelet identity: CN %q O %q", cl.Subject.CommonName, cl.Subject.Organization)
	}
	if _, err := cl.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Error("a client certificate verifies as a server's")
	}
}

// The overlay sets exactly what deploy/base/configmap.yaml asks an operator to set, and the
// image; it fails clearly when the placeholders are gone.
func TestOverlay(t *testing.T) {
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	r := &runner{cfg: Config{Repo: repo, State: state, KipvsImage: "ghcr.io/kipvs/kipvs:node-e2e", HostIP: net.ParseIP("192.168.123.1"), PodCIDR: DefaultPodCIDR}}
	r.serverURL = "https://192.168.123.1:34567"
	dir, err := r.overlay()
	if err != nil {
		t.Fatal(err)
	}
	k, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"patches:\n- path: configmap-patch.yaml\n", "newName: ghcr.io/kipvs/kipvs", "newTag: node-e2e"} {
		if !strings.Contains(string(k), want) {
			t.Errorf("kustomization.yaml lacks %q:\n%s", want, k)
		}
	}
	if strings.Contains(string(k), "filter-backend") {
		t.Errorf("the kipvs run's kustomization.yaml sets a filter backend:\n%s", k)
	}
	// kipvs-nftables: the same overlay, and the flag appended to the kipvs container's command.
	r.cfg.Proxy = ProxyKipvsNFTables
	if dir, err = r.overlay(); err != nil {
		t.Fatal(err)
	}
	kn, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(kn), string(k)) || !strings.Contains(string(kn), "path: /spec/template/spec/containers/0/command/-\n      value: --kipvs-filter-backend=nftables\n") {
		t.Errorf("the kipvs-nftables run's kustomization.yaml:\n%s", kn)
	}
	r.cfg.Proxy = ""
	b, err := os.ReadFile(filepath.Join(dir, "configmap-patch.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	if err := yaml.Unmarshal(b, &cm); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(cm.Data["kubeconfig.conf"], "server: https://192.168.123.1:34567\n") ||
		!strings.Contains(cm.Data["config.conf"], "clusterCIDR: 10.244.0.0/16\n") ||
		!strings.Contains(cm.Data["config.conf"], "metricsBindAddress: 0.0.0.0:10249\n") {
		t.Errorf("patched ConfigMap:\n%s", b)
	}
	if cm.Name != "kipvs" || cm.Namespace != "kube-system" {
		t.Errorf("patch targets %s/%s", cm.Namespace, cm.Name)
	}

	// A deploy/ whose ConfigMap lost its placeholders.
	fake := t.TempDir()
	if err := os.MkdirAll(filepath.Join(fake, "deploy", "base"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fake, "deploy", "base", "configmap.yaml"),
		[]byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: kipvs}\ndata: {config.conf: x, kubeconfig.conf: y}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.cfg.Repo = fake
	if _, err := r.overlay(); err == nil || !strings.Contains(err.Error(), "no longer holds") {
		t.Errorf("overlay over a ConfigMap without placeholders: %v", err)
	}
}

func TestSuiteProgressLines(t *testing.T) {
	var out bytes.Buffer
	p := &progress{out: &out}
	in := "------------------------------\n[sig-network] Services should serve a basic endpoint from pods  [Conformance]\n" +
		"k8s.io/kubernetes/test/e2e/network/service.go:787\n  STEP: Creating a kubernetes client @ 11/27/26 12:00:00\n" +
		"• [42.101 seconds]\n------------------------------\nS [SKIPPED] [0.001 seconds]\n" +
		"[sig-network] Services should fail\nx.go:1\n• [FAILED] [61.000 seconds]\n" +
		"Ran 2 of 7000 Specs in 103.2 seconds\nFAIL! -- 1 Passed | 1 Failed | 0 Pending | 6998 Skipped\n"
	// Written in odd pieces, as a pipe delivers it.
	for i := 0; i < len(in); i += 7 {
		p.Write([]byte(in[i:min(i+7, len(in))]))
	}
	want := "suite:   1 [42.101 seconds]  [sig-network] Services should serve a basic endpoint from pods  [Conformance]\n" +
		"suite:   2 [FAILED] [61.000 seconds]  [sig-network] Services should fail\n" +
		"suite: Ran 2 of 7000 Specs in 103.2 seconds\nsuite: FAIL! -- 1 Passed | 1 Failed | 0 Pending | 6998 Skipped\n"
	if out.String() != want {
		t.Errorf("progress:\n%s\nwant:\n%s", out.String(), want)
	}
	// The parallel runner prints each test's block when it ends: its result first.
	out.Reset()
	p = &progress{out: &out}
	p.Write([]byte("------------------------------\n• [FAILED] [230.772 seconds]\n[sig-network] Proxy should proxy\nx.go:1\n" +
		"------------------------------\n• [12.000 seconds]\n[sig-network] Services should serve\n[sig-network] Services should serve\n"))
	if want := "suite:   1 [FAILED] [230.772 seconds]  [sig-network] Proxy should proxy\nsuite:   2 [12.000 seconds]  [sig-network] Services should serve\n"; out.String() != want {
		t.Errorf("parallel progress:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestSuiteArgsSerialAndParallel(t *testing.T) {
	r := &runner{admin: "/s/admin.kubeconfig", kubectl: "/b/kubectl", cfg: Config{Suite: &Suite{
		Bin: "/b/e2e.test", Ginkgo: "/b/ginkgo", Focus: `\[sig-network\]`, Skip: "SCTP", Dir: "/r", Timeout: time.Hour}}}
	serial := strings.Join(r.suiteArgs(), " ")
	for _, w := range []string{"--kubeconfig=/s/admin.kubeconfig", "--provider=skeleton", `--ginkgo.focus=\[sig-network\]`, "--ginkgo.skip=SCTP", "--ginkgo.seed=1", "--report-prefix=suite_"} {
		if !strings.Contains(serial, w) {
			t.Errorf("serial args lack %s: %s", w, serial)
		}
	}
	r.cfg.Suite.Procs = 3
	par := strings.Join(r.suiteArgs(), " ")
	if !strings.HasPrefix(par, `--procs=3 --focus=\[sig-network\] --timeout=1h0m0s --seed=1 --v`) || !strings.Contains(par, "--skip=SCTP /b/e2e.test -- --kubeconfig=") ||
		strings.Contains(par, "--ginkgo.") {
		t.Errorf("parallel args: %s", par)
	}
}

// The chart's values set what the overlay sets in deploy/: the apiserver's host and port,
// the pod CIDR, metrics reachable from the host, and the imported image.
func TestChartValues(t *testing.T) {
	r := &runner{cfg: Config{KipvsImage: "ghcr.io/kipvs/kipvs:node-e2e", PodCIDR: "10.245.0.0/16"}}
	r.serverURL = "https://192.168.123.1:34567"
	b, err := r.chartValues()
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Image struct {
			Repository string `json:"repository"`
			Tag        string `json:"tag"`
		} `json:"image"`
		APIServer struct {
			Host string `json:"host"`
			Port int    `json:"port"`
		} `json:"apiServer"`
		ClusterCIDR        string `json:"clusterCIDR"`
		MetricsBindAddress string `json:"metricsBindAddress"`
		FilterBackend      string `json:"filterBackend"`
	}
	if err := yaml.UnmarshalStrict(b, &v); err != nil {
		t.Fatalf("%v:\n%s", err, b)
	}
	if v.Image.Repository != "ghcr.io/kipvs/kipvs" || v.Image.Tag != "node-e2e" || v.APIServer.Host != "192.168.123.1" ||
		v.APIServer.Port != 34567 || v.ClusterCIDR != "10.245.0.0/16" || v.MetricsBindAddress != "0.0.0.0:10249" || v.FilterBackend != "iptables" {
		t.Errorf("chart values:\n%s", b)
	}
	r.cfg.Proxy = ProxyKipvsNFTables
	if b, err = r.chartValues(); err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, &v); err != nil || v.FilterBackend != "nftables" {
		t.Errorf("kipvs-nftables chart values (%v):\n%s", err, b)
	}
	r.cfg.Proxy = ""
	r.serverURL = "https://192.168.123.1"
	if _, err := r.chartValues(); err == nil {
		t.Error("an apiserver URL without a port gave values")
	}
}
