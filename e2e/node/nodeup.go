package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kipvs/kipvs/e2e/vm"
	"github.com/kipvs/kipvs/internal/testutil/poll"
)

// nodeModules are the kernel modules the node needs beyond the VM's defaults: its NIC on the
// tap, overlayfs for containerd's snapshots.
var nodeModules = []string{"virtio_net", "overlay", "xt_tcpudp", "xt_statistic"}

// containerdConfig is containerd 1.6's configuration (version 2): state on the VM's tmpfs,
// runc from the cache with the cgroupfs driver (no systemd in the VM), and the CRI plugin's
// CNI configuration written from a template once the kubelet knows its pod CIDR.
const containerdConfig = `version = 2
root = "/var/lib/containerd"
state = "/run/containerd"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs"]

[grpc]
  address = "/run/containerd/containerd.sock"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "%[1]s"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "%[2]s/usr/sbin/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "%[2]s/usr/lib/cni"
    conf_dir = "/run/node/cni/net.d"
    conf_template = "%[3]s"
`

// cniTemplate is the pod network: one bridge, host-local addresses from the node's pod CIDR
// (filled in by containerd), hairpin mode so a pod reaches itself through a Service.
const cniTemplate = `{
  "cniVersion": "0.4.0",
  "name": "kipvs-node",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "{{.PodCIDR}}"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`

// kubeletConfig: cgroup v2 with the cgroupfs driver, containerd's socket, client
// certificates from the cluster CA, webhook authentication and authorization (the apiserver's
// client certificate is system:masters), no swap check, no image garbage collection (the
// images are imported, there is no registry to pull them again) and eviction thresholds
// that fit a VM whose disks are tmpfs.
const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
failSwapOn: false
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: %[1]s
authorization:
  mode: Webhook
clusterDomain: cluster.local
clusterDNS:
- %[2]s
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%%
  nodefs.inodesFree: 1%%
  imagefs.available: 1%%
volumePluginDir: /var/lib/kubelet/volumeplugins
serializeImagePulls: false
`

// nodeUp writes the nodes' configuration, boots one VM per node with the node script and
// waits until every Node is Ready (which needs its pod CIDR and the CNI configuration made
// from it).
func (r *runner) nodeUp(ctx context.Context) error {
	c := r.cfg
	files := map[string]string{
		"containerd.toml": fmt.Sprintf(containerdConfig, c.PauseImage, c.NodePkgs, filepath.Join(c.State, "cni.tmpl")),
		"cni.tmpl":        cniTemplate,
		"kubelet.yaml":    fmt.Sprintf(kubeletConfig, r.pki.Cert("ca"), ClusterDNS),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(c.State, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	kdir, err := kernelModules(c.VMCache)
	if err != nil {
		return err
	}
	if err := r.createNodes(ctx); err != nil {
		return err
	}
	for _, n := range r.nodes {
		r.startVM(ctx, n, kdir)
	}
	deadline, _ := ctx.Deadline()
	var vmErr error
	seen := map[string]bool{}
	names := make([]string, len(r.nodes))
	for i, n := range r.nodes {
		names[i] = n.name
	}
	_, err = poll.Wait(time.Until(deadline)-2*time.Minute, "Nodes "+strings.Join(names, ", ")+" Ready", func() (bool, string) {
		if vmErr = r.vmEnded(); vmErr != nil {
			return true, ""
		}
		if vmErr = r.cl.Exited(); vmErr != nil {
			return true, ""
		}
		for _, n := range r.nodes {
			for _, l := range strings.Split(n.out.String(), "\n") {
				if strings.HasPrefix(l, "node: ") && !seen[n.name+l] {
					seen[n.name+l] = true
					r.logf("VM %s%s", r.nodeLabel(n), strings.TrimSpace(l))
				}
			}
		}
		out, err := r.kubectlRun(ctx, 10*time.Second, nil, "get", "nodes", "-o",
			`jsonpath={range .items[*]}{.metadata.name} {.spec.podCIDR} {range .status.conditions[*]}{.type}={.status}({.reason}) {end};{end}`)
		if err != nil {
			return false, err.Error()
		}
		ready := 0
		for _, l := range strings.Split(out, ";") {
			if strings.Contains(l, "Ready=True") {
				ready++
			}
		}
		return ready == len(r.nodes), out
	})
	if vmErr != nil {
		return vmErr
	}
	return err
}

// nodeLabel prefixes a node's lines when there are several.
func (r *runner) nodeLabel(n *vmNode) string {
	if len(r.nodes) == 1 {
		return ""
	}
	return n.name + " "
}

// startVM boots node n's VM with the node script. The VM outlives ctx (it is stopped by
// request at teardown) but not the run: teardown cancels it when it does not stop.
func (r *runner) startVM(ctx context.Context, n *vmNode, kdir string) {
	c := r.cfg
	env := map[string]string{
		"NODE_ROOT": c.NodePkgs, "NODE_IP": n.ip.String(), "NODE_PREFIX": fmt.Sprint(c.Prefix),
		"NODE_NAME": n.name, "NODE_STATE": c.State, "NODE_BIN": c.NodeBin,
		"NODE_KUBECONFIG": filepath.Join(c.State, n.kubeletCert()+".kubeconfig"),
		"NODE_ROUTES":     peerRoutes(r.nodes, n),
		"NODE_IMAGES":     strings.Join(c.Images, " "), "NODE_KVER_MODULES": kdir,
	}
	var script strings.Builder
	for k, v := range env {
		fmt.Fprintf(&script, "export %s='%s'\n", k, strings.ReplaceAll(v, "'", `'\''`))
	}
	script.WriteString(nodeScript)
	n.out = &vm.SyncBuffer{}
	deadline, _ := ctx.Deadline()
	vcfg := vm.Config{
		CacheDir: c.VMCache, Script: script.String(), WorkDir: c.Repo, Timeout: time.Until(deadline),
		Net:      &vm.Net{Tap: n.tap, MAC: n.mac},
		MemoryMB: c.MemoryMB, CPUs: c.CPUs,
		Modules: append(vm.DefaultModules(), nodeModules...),
		Console: n.out, Artifacts: filepath.Join(c.State, n.logs),
	}
	n.stop = make(chan struct{})
	vcfg.Stop = n.stop
	n.done = make(chan error, 1)
	vmCtx, vmCancel := context.WithCancel(context.WithoutCancel(ctx))
	n.cancel = vmCancel
	go func() {
		res, err := vm.Run(vmCtx, vcfg)
		n.output = res.Output
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("the node script of %s exited %d:\n%s", n.name, res.ExitCode, tailLines(res.Output, 40))
		}
		n.done <- err
	}()
	r.logf("VM booting (qemu TCG, %d MiB, %d CPUs): kubelet %s at %s on %s, pod CIDR %s", c.MemoryMB, c.CPUs, n.name, n.ip, n.tap, n.podCIDR)
}

// kernelModules is the VM kernel's module directory in the VM cache.
func kernelModules(cache string) (string, error) {
	b, err := os.ReadFile(filepath.Join(cache, "current"))
	if err != nil {
		return "", fmt.Errorf("VM kernel cache not prepared (make vm-prepare): %w", err)
	}
	kver := strings.TrimSpace(string(b))
	return filepath.Join(cache, kver, "lib", "modules", kver), nil
}
