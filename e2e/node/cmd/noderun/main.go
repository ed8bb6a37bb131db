// Command noderun brings up kipvs's single-node Kubernetes cluster (e2e/node,
// docs/conformance.md) and runs its smoke: the node Ready, kipvs's DaemonSet pod Ready, one
// ClusterIP Service answering from a pod through kipvs. It prints each step as it goes, the
// wall time of each, `kubectl get pods -A -o wide` and kipvs's IPVS table, and exits non-zero
// naming the first step that failed. Needs root (the tap device).
//
//	noderun --image kipvs.tar --image pause.tar --image echo.tar \
//	    --kipvs-image ghcr.io/kipvs/kipvs:dev --echo-image ... --pause-image registry.k8s.io/pause:3.10.1
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/kipvs/kipvs/e2e/node"
)

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

func main() {
	cfg := node.Config{Log: os.Stdout}
	var images multi
	var hostIP, nodeIP string
	flag.StringVar(&cfg.Repo, "repo", ".", "repository root (deploy/ is applied from there)")
	flag.StringVar(&cfg.K8sBin, "k8s-bin", ".cache/k8s", "directory with etcd and kube-apiserver (make e2e-bins)")
	flag.StringVar(&cfg.NodeBin, "node-bin", ".cache/node-bin", "directory with kubelet, kube-controller-manager, kube-scheduler, kubectl (make node-bins)")
	flag.StringVar(&cfg.NodePkgs, "node-pkgs", ".cache/node", "containerd, runc and CNI plugins extracted by e2e/node/prepare.sh")
	flag.StringVar(&cfg.VMCache, "vm-cache", ".cache/vm", "kernel cache prepared by e2e/vm/prepare.sh")
	flag.StringVar(&cfg.State, "state", ".cache/node-e2e", "state directory (removed first): certificates, configurations, logs")
	flag.Var(&images, "image", "OCI archive imported into containerd (repeatable)")
	flag.StringVar(&cfg.KipvsImage, "kipvs-image", "", "the kipvs image's name:tag in the archives")
	flag.StringVar(&cfg.EchoImage, "echo-image", "", "an image with /echo (e2e/echo) in the archives")
	flag.StringVar(&cfg.CorednsImage, "coredns-image", "", "CoreDNS's image in the archives: apply kube-dns ("+node.ClusterDNS+") after the proxy and resolve a name through it from a pod (empty: no kube-dns)")
	flag.StringVar(&cfg.PauseImage, "pause-image", "registry.k8s.io/pause:3.10.1", "containerd's sandbox image, in the archives")
	flag.StringVar(&cfg.Tap, "tap", node.DefaultTap, "host tap device linking the host and the node")
	flag.StringVar(&hostIP, "host-ip", "192.168.123.1", "the host's end of the link (the apiserver listens here)")
	flag.StringVar(&nodeIP, "node-ip", "192.168.123.2", "the node's InternalIP")
	flag.IntVar(&cfg.Prefix, "prefix", 24, "prefix length of the link's subnet")
	flag.StringVar(&cfg.NodeName, "node-name", node.DefaultNodeName, "the node's name")
	flag.IntVar(&cfg.MemoryMB, "memory", 3072, "VM memory in MiB")
	flag.IntVar(&cfg.CPUs, "cpus", 2, "VM CPUs")
	flag.DurationVar(&cfg.Timeout, "timeout", 20*time.Minute, "limit for the whole run")
	flag.StringVar(&cfg.Until, "until", "", "end after this step: node (Ready) or kipvs (its pod Ready); empty: the whole smoke")
	flag.Parse()
	cfg.Images = images
	cfg.HostIP, cfg.NodeIP = net.ParseIP(hostIP).To4(), net.ParseIP(nodeIP).To4()
	if cfg.HostIP == nil || cfg.NodeIP == nil {
		fmt.Fprintln(os.Stderr, "noderun: --host-ip and --node-ip must be IPv4 addresses")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	rep, err := node.Run(ctx, cfg)
	if rep != nil {
		if rep.Pods != "" {
			fmt.Printf("\n$ kubectl get pods -A -o wide\n%s", rep.Pods)
		}
		if rep.IPVS != "" {
			fmt.Printf("\n$ kubectl exec -n kube-system daemonset/kipvs -- kipvs status -Ln\n%s", rep.IPVS)
		}
		fmt.Println("\nphases:")
		for _, p := range rep.Phases {
			fmt.Printf("  %-28s %s\n", p.Name, p.Elapsed.Round(100*time.Millisecond))
		}
	}
	fmt.Printf("node smoke: %s in %s\n", map[bool]string{true: "PASS", false: "FAIL"}[err == nil], time.Since(start).Round(time.Second))
	if err != nil {
		fmt.Fprintf(os.Stderr, "noderun: %v\n", err)
		os.Exit(1)
	}
}
