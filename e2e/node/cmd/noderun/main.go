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
	flag.StringVar(&cfg.Helm, "helm", "", "a helm binary: install kipvs from charts/kipvs (helm template, applied with kubectl) rather than deploy/")
	flag.StringVar(&cfg.EchoImage, "echo-image", "", "an image with /echo (e2e/echo) in the archives")
	flag.StringVar(&cfg.CorednsImage, "coredns-image", "", "CoreDNS's image in the archives: apply kube-dns ("+node.ClusterDNS+") after the proxy and resolve a name through it from a pod (empty: no kube-dns)")
	flag.StringVar(&cfg.PauseImage, "pause-image", "registry.k8s.io/pause:3.10.1", "containerd's sandbox image, in the archives")
	flag.StringVar(&cfg.Tap, "tap", node.DefaultTap, "the host's end of the link: the tap device with one node, the bridge the nodes' taps (TAP-1, TAP-2, ...) join with more")
	flag.IntVar(&cfg.Nodes, "nodes", 1, fmt.Sprintf("how many nodes (one TCG VM each, 1 to %d); node i is at the i-th address from --node-ip with the i-th /24 of --pod-cidr", node.MaxNodes))
	flag.StringVar(&hostIP, "host-ip", "192.168.123.1", "the host's end of the link (the apiserver listens here)")
	flag.StringVar(&nodeIP, "node-ip", "192.168.123.2", "the (first) node's InternalIP")
	flag.IntVar(&cfg.Prefix, "prefix", 24, "prefix length of the link's subnet")
	flag.StringVar(&cfg.PodCIDR, "pod-cidr", node.DefaultPodCIDR, "the pod network, routed from the host to the node (runs at the same time need different ones)")
	flag.StringVar(&cfg.NodeName, "node-name", node.DefaultNodeName, "the (first) node's name; the others are numbered like it (node-2, ...)")
	flag.IntVar(&cfg.MemoryMB, "memory", 3072, "VM memory in MiB")
	flag.IntVar(&cfg.CPUs, "cpus", 2, "VM CPUs")
	flag.DurationVar(&cfg.Timeout, "timeout", 20*time.Minute, "limit for the whole run")
	flag.StringVar(&cfg.Proxy, "proxy", node.ProxyKipvs, "the service proxy: kipvs (deploy/), kipvs-nftables (deploy/ with --kipvs-filter-backend=nftables) or kube-proxy (kubeadm's DaemonSet, e2e/node/manifests/kube-proxy.yaml)")
	flag.StringVar(&cfg.KubeProxyImage, "kube-proxy-image", "registry.k8s.io/kube-proxy:v1.34.10", "kube-proxy's image name:tag in the archives (with --proxy kube-proxy)")
	flag.StringVar(&cfg.MetricsOut, "metrics-out", "", "save the proxy's /metrics (GET http://NODE_IP:10249/metrics from the host) to this file at the end")
	flag.BoolVar(&cfg.Hold, "hold", false, "keep the cluster up after the last step until interrupted (or --timeout), to look at it by hand")
	flag.StringVar(&cfg.Until, "until", "", "end after this step: node (Ready) or kipvs (its pod Ready); empty: the whole smoke")
	var suite node.Suite
	var suiteArgs multi
	flag.StringVar(&suite.Bin, "suite", "", "e2e.test (make conformance-bins): run upstream's suite after the smoke")
	flag.StringVar(&suite.Focus, "focus", "", "the suite's --ginkgo.focus")
	flag.StringVar(&suite.Skip, "skip", "", "the suite's --ginkgo.skip")
	flag.StringVar(&suite.Dir, "report-dir", ".cache/conformance/kipvs", "the suite's report directory (removed first)")
	flag.DurationVar(&suite.Timeout, "suite-timeout", 4*time.Hour, "the suite's --ginkgo.timeout")
	flag.StringVar(&suite.Commit, "commit", "", "kipvs's version, recorded in the report")
	flag.IntVar(&suite.Procs, "procs", 1, "run the suite in this many parallel processes (through the ginkgo CLI, --ginkgo)")
	flag.StringVar(&suite.Ginkgo, "ginkgo", ".cache/node-bin/ginkgo", "the ginkgo CLI (make conformance-bins), for --procs > 1")
	flag.Var(&suiteArgs, "suite-arg", "another e2e.test flag (repeatable)")
	flag.Parse()
	if suite.Bin != "" {
		suite.Args = suiteArgs
		cfg.Suite = &suite
	}
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
			fmt.Printf("\n$ %s\n%s", rep.IPVSCommand, rep.IPVS)
		}
		fmt.Println("\nphases:")
		for _, p := range rep.Phases {
			fmt.Printf("  %-28s %s\n", p.Name, p.Elapsed.Round(100*time.Millisecond))
		}
	}
	what := "node smoke"
	if cfg.Suite != nil {
		what = "conformance run"
	}
	fmt.Printf("%s: %s in %s\n", what, map[bool]string{true: "PASS", false: "FAIL"}[err == nil], time.Since(start).Round(time.Second))
	if err != nil {
		fmt.Fprintf(os.Stderr, "noderun: %v\n", err)
		os.Exit(1)
	}
}
