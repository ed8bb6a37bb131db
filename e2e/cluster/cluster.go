package cluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/kipvs/kipvs/internal/testutil/poll"
)

// GuestServer is the apiserver's address as a VM with cluster networking sees it.
const GuestServer = "https://10.0.2.100:6443"

// DefaultServiceCIDR is the default --service-cluster-ip-range: dual-stack, IPv4 primary
// (Services without ipFamilyPolicy stay IPv4-only; dual-stack and IPv6 Services can be made).
const DefaultServiceCIDR = "10.96.0.0/16,fd00:10:96::/112"

// Options configure Start.
type Options struct {
	BinDir string // holds etcd and kube-apiserver
	Dir    string // state directory (etcd data, certs, logs); created
	// ServiceCIDR is --service-cluster-ip-range (default DefaultServiceCIDR).
	ServiceCIDR string
	Log         io.Writer // process output; nil discards (logs are also in Dir)
	// Node, when set, makes the apiserver fit for a cluster with a real kubelet (e2e/node).
	Node *NodeAPI
}

// NodeAPI is what an apiserver serving real nodes needs beyond the API-level tests' setup:
// an address the node reaches, a serving certificate from the cluster CA (pods verify it
// with their ServiceAccount's ca.crt), client certificates, Node authorization, the
// ServiceAccount admission plugin and the `kubernetes` Service's endpoints.
type NodeAPI struct {
	Address             string // bind and advertise address (the host's end of the node link)
	ServingCert         string // files
	ServingKey          string
	ClientCA            string // the CA of the kubelet's and the controllers' client certificates
	KubeletClientCert   string // the apiserver's client certificate towards kubelets (exec, logs)
	KubeletClientKey    string
	ServiceAccountKey   string // RSA private key (PEM) signing ServiceAccount tokens
	KubeletAddressTypes string // --kubelet-preferred-address-types (default InternalIP)
}

// Cluster is a running etcd + kube-apiserver pair.
type Cluster struct {
	Dir     string
	APIPort int
	Token   string
	address string // where the apiserver listens
	opts    Options
	procs   []*proc
}

// Start launches etcd and kube-apiserver and waits until the apiserver answers /readyz.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	if o.ServiceCIDR == "" {
		o.ServiceCIDR = DefaultServiceCIDR
	}
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(o.BinDir, b)); err != nil {
			return nil, fmt.Errorf("cluster: %s not built (make e2e-bins): %w", b, err)
		}
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	c := &Cluster{Dir: o.Dir, opts: o}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	etcdPort, peerPort := ports[0], ports[1]
	c.APIPort = ports[2]
	tok := make([]byte, 16)
	if _, err := rand.Read(tok); err != nil {
		return nil, err
	}
	c.Token = hex.EncodeToString(tok)
	tokenFile := filepath.Join(o.Dir, "tokens.csv")
	if err := os.WriteFile(tokenFile, []byte(c.Token+",admin,admin-uid,system:masters\n"), 0o600); err != nil {
		return nil, err
	}
	keyFile := filepath.Join(o.Dir, "sa.key")
	if o.Node != nil {
		keyFile = o.Node.ServiceAccountKey
	} else if err := writeRSAKey(keyFile); err != nil {
		return nil, err
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdPort)
	if err := c.spawn(o, "etcd", filepath.Join(o.BinDir, "etcd"),
		"--data-dir", filepath.Join(o.Dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", "http://127.0.0.1:"+strconv.Itoa(peerPort),
		"--initial-advertise-peer-urls", "http://127.0.0.1:"+strconv.Itoa(peerPort),
		"--initial-cluster", "default=http://127.0.0.1:"+strconv.Itoa(peerPort),
		"--unsafe-no-fsync", "--log-level", "warn"); err != nil {
		return nil, err
	}
	args := []string{
		"--etcd-servers", etcdURL,
		"--secure-port", strconv.Itoa(c.APIPort),
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-account-key-file", keyFile, "--service-account-signing-key-file", keyFile,
		"--token-auth-file", tokenFile,
		// As every cluster that runs kube-proxy or kipvs as a DaemonSet: both are privileged.
		"--allow-privileged=true",
		"--service-cluster-ip-range", o.ServiceCIDR,
		"--v", "1",
	}
	c.address = "127.0.0.1"
	if n := o.Node; n != nil {
		c.address = n.Address
		types := n.KubeletAddressTypes
		if types == "" {
			types = "InternalIP"
		}
		args = append(args,
			"--bind-address", n.Address, "--advertise-address", n.Address,
			"--tls-cert-file", n.ServingCert, "--tls-private-key-file", n.ServingKey,
			"--client-ca-file", n.ClientCA,
			"--kubelet-client-certificate", n.KubeletClientCert, "--kubelet-client-key", n.KubeletClientKey,
			"--kubelet-preferred-address-types", types,
			"--authorization-mode", "Node,RBAC",
			"--enable-admission-plugins", "NodeRestriction")
	} else {
		args = append(args,
			"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
			"--cert-dir", filepath.Join(o.Dir, "certs"),
			"--authorization-mode", "RBAC",
			"--disable-admission-plugins", "ServiceAccount",
			"--endpoint-reconciler-type", "none")
	}
	if err := c.spawn(o, "kube-apiserver", filepath.Join(o.BinDir, "kube-apiserver"), args...); err != nil {
		c.Stop()
		return nil, err
	}
	if err := c.waitReady(ctx, 90*time.Second); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// Spawn starts one more process of the cluster (kube-controller-manager, kube-scheduler), its
// output in Dir/NAME.log; Stop ends it (before the apiserver and etcd). The caller checks it
// is ready.
func (c *Cluster) Spawn(name, bin string, args ...string) error {
	return c.spawn(c.opts, name, bin, args...)
}

// Exited reports the first process of the cluster that has ended, as an error naming it
// and its log; nil while all run.
func (c *Cluster) Exited() error {
	for _, p := range c.procs {
		select {
		case <-p.done:
			return fmt.Errorf("cluster: %s exited: %s (see %s)", p.name, p.cmd.ProcessState, filepath.Join(c.Dir, p.name+".log"))
		default:
		}
	}
	return nil
}

// proc is one process of the cluster; done is closed when it has ended (and been waited for).
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

// FreePorts returns n TCP ports free on 127.0.0.1 right now.
func FreePorts(n int) ([]int, error) { return freePorts(n) }

func (c *Cluster) spawn(o Options, name, bin string, args ...string) error {
	logf, err := os.Create(filepath.Join(o.Dir, name+".log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	var w io.Writer = logf
	if o.Log != nil {
		w = io.MultiWriter(logf, o.Log)
	}
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("cluster: start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	c.procs = append(c.procs, p)
	return nil
}

// waitReady polls /readyz with the admin token until it answers 200 or the deadline passes.
func (c *Cluster) waitReady(ctx context.Context, limit time.Duration) error {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	var stop error // a reason to give up before limit
	_, err := poll.Wait(limit, "cluster: apiserver ready", func() (bool, string) {
		if stop = c.Exited(); stop != nil {
			return true, ""
		}
		if stop = ctx.Err(); stop != nil {
			return true, ""
		}
		req, _ := http.NewRequestWithContext(ctx, "GET", c.HostServer()+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+c.Token)
		resp, err := client.Do(req)
		if err != nil {
			return false, err.Error()
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode == 200, fmt.Sprintf("%d %s", resp.StatusCode, bytes.TrimSpace(b))
	})
	if err != nil {
		return fmt.Errorf("%w (logs in %s)", err, c.Dir)
	}
	return stop
}

// Kubeconfig returns a kubeconfig for server (https://127.0.0.1:PORT on the host, or
// GuestServer inside the VM) authenticating with the admin token. The apiserver's serving
// certificate is self-signed for 127.0.0.1, so TLS verification is skipped: this is a test
// apiserver reachable only from this machine.
func (c *Cluster) Kubeconfig(server string) []byte {
	return []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: %s
    insecure-skip-tls-verify: true
users:
- name: admin
  user:
    token: %s
contexts:
- name: e2e
  context:
    cluster: e2e
    user: admin
current-context: e2e
`, server, c.Token))
}

// HostServer is the apiserver's URL on the host.
func (c *Cluster) HostServer() string {
	return "https://" + net.JoinHostPort(c.address, strconv.Itoa(c.APIPort))
}

// Stop terminates the processes (apiserver first) and waits for them.
func (c *Cluster) Stop() {
	for i := len(c.procs) - 1; i >= 0; i-- {
		p := c.procs[i]
		pid := p.cmd.Process.Pid
		_ = syscall.Kill(-pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			<-p.done
		}
	}
	c.procs = nil
}

func freePorts(n int) ([]int, error) {
	var out []int
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

func writeRSAKey(path string) error {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	b := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
	if b == nil {
		return errors.New("cluster: encode key")
	}
	return os.WriteFile(path, b, 0o600)
}
