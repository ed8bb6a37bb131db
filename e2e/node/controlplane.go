package node

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/kipvs/kipvs/e2e/cluster"
	"github.com/kipvs/kipvs/internal/testutil/poll"
)

// serviceIP is the `kubernetes` Service's ClusterIP (the first address of ServiceCIDR).
var serviceIP = net.ParseIP("10.96.0.1")

// controlPlane issues the certificates and starts etcd, kube-apiserver (on the link's host
// address), kube-controller-manager (ServiceAccount tokens, node IPAM) and kube-scheduler,
// natively on the host. It is ready when the default ServiceAccount exists (the controllers
// run and can write).
func (r *runner) controlPlane(ctx context.Context) error {
	c := r.cfg
	p, err := NewPKI(filepath.Join(c.State, "pki"))
	if err != nil {
		return err
	}
	r.pki = p
	specs := []CertSpec{
		{Name: "apiserver", CN: "kube-apiserver", Server: true,
			DNS: []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost"},
			IPs: []net.IP{c.HostIP, serviceIP, net.ParseIP("127.0.0.1")}},
		{Name: "apiserver-kubelet-client", CN: "kube-apiserver-kubelet-client", Orgs: []string{"system:masters"}, Client: true},
		{Name: "admin", CN: "kubernetes-admin", Orgs: []string{"system:masters"}, Client: true},
		{Name: "controller-manager", CN: "system:kube-controller-manager", Client: true},
		{Name: "scheduler", CN: "system:kube-scheduler", Client: true},
	}
	for _, n := range r.nodes {
		specs = append(specs, CertSpec{Name: n.kubeletCert(), CN: "system:node:" + n.name, Orgs: []string{"system:nodes"}, Client: true})
	}
	for _, s := range specs {
		if err := p.Issue(s); err != nil {
			return err
		}
	}
	saKey, err := p.WriteServiceAccountKey()
	if err != nil {
		return err
	}
	start := time.Now()
	r.cl, err = cluster.Start(ctx, cluster.Options{
		BinDir: c.K8sBin, Dir: filepath.Join(c.State, "cluster"), ServiceCIDR: ServiceCIDR,
		Node: &cluster.NodeAPI{
			Address: c.HostIP.String(), ServingCert: p.Cert("apiserver"), ServingKey: p.Key("apiserver"),
			ClientCA: p.Cert("ca"), KubeletClientCert: p.Cert("apiserver-kubelet-client"),
			KubeletClientKey: p.Key("apiserver-kubelet-client"), ServiceAccountKey: saKey,
		},
	})
	if err != nil {
		return fmt.Errorf("etcd and kube-apiserver: %w", err)
	}
	r.serverURL = "https://" + net.JoinHostPort(c.HostIP.String(), strconv.Itoa(r.cl.APIPort))
	r.logf("kube-apiserver ready on %s in %s", r.server(), time.Since(start).Round(100*time.Millisecond))
	kubeconfigs := map[string]string{}
	names := []string{"admin", "controller-manager", "scheduler"}
	for _, n := range r.nodes {
		names = append(names, n.kubeletCert())
	}
	for _, name := range names {
		path := filepath.Join(c.State, name+".kubeconfig")
		if err := os.WriteFile(path, p.Kubeconfig(r.server(), name), 0o644); err != nil {
			return err
		}
		kubeconfigs[name] = path
	}
	r.admin = kubeconfigs["admin"]
	ports, err := cluster.FreePorts(2)
	if err != nil {
		return err
	}
	kcm := kubeconfigs["controller-manager"]
	if err := r.cl.Spawn("kube-controller-manager", filepath.Join(c.NodeBin, "kube-controller-manager"),
		"--kubeconfig", kcm, "--authentication-kubeconfig", kcm, "--authorization-kubeconfig", kcm,
		"--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(ports[0]),
		"--leader-elect=false", "--use-service-account-credentials=true",
		"--service-account-private-key-file", saKey, "--root-ca-file", p.Cert("ca"),
		"--cluster-signing-cert-file", p.Cert("ca"), "--cluster-signing-key-file", p.Key("ca"),
		"--allocate-node-cidrs=true", "--cluster-cidr", c.PodCIDR, "--node-cidr-mask-size", "24",
		"--service-cluster-ip-range", ServiceCIDR, "--v", "1"); err != nil {
		return err
	}
	sch := kubeconfigs["scheduler"]
	if err := r.cl.Spawn("kube-scheduler", filepath.Join(c.NodeBin, "kube-scheduler"),
		"--kubeconfig", sch, "--authentication-kubeconfig", sch, "--authorization-kubeconfig", sch,
		"--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(ports[1]),
		"--leader-elect=false", "--v", "1"); err != nil {
		return err
	}
	_, err = poll.Wait(90*time.Second, "kube-controller-manager: ServiceAccount default/default created", func() (bool, string) {
		if err := r.cl.Exited(); err != nil {
			return true, ""
		}
		out, err := r.kubectlRun(ctx, 10*time.Second, nil, "get", "serviceaccount", "default", "-n", "default", "-o", "name")
		if err != nil {
			return false, err.Error()
		}
		return strings.TrimSpace(out) != "", out
	})
	if err != nil {
		return err
	}
	return r.cl.Exited()
}
