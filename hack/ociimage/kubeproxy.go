package main

import (
	"io/fs"

	"github.com/kipvs/kipvs/hack/ociimage/oci"
	"github.com/kipvs/kipvs/hack/ociimage/rootfs"
)

// iptablesWrapper is /usr/sbin/iptables-wrapper of the kube-proxy image: iptables, ip6tables
// and their -save and -restore are links to it. It picks the node's backend the first time it
// runs, with the rules upstream's iptables-wrapper (kubernetes-sigs/iptables-wrappers) uses and
// kipvs's own detection documents (internal/netfilter/backend.go): kubelet's hint chains in
// iptables-nft's mangle table, then in iptables-legacy's, then whichever holds more rules (nft
// on an empty node). The choice is kept in /run/iptables-wrapper.mode; each call then runs the
// chosen mode's program (iptables-nft-save, ...). Written for dash alone: no other tool.
const iptablesWrapper = `#!/bin/sh
# iptables-wrapper: runs iptables-nft or iptables-legacy, whichever the node uses.
# (The two variables are for its test: hack/ociimage's TestIPTablesWrapper.)
mode_file=${IPTABLES_WRAPPER_MODE_FILE:-/run/iptables-wrapper.mode}
sbin=${IPTABLES_WRAPPER_SBIN:-/usr/sbin}
hint() {
	while IFS= read -r line; do
		case $line in :KUBE-IPTABLES-HINT\ * | :KUBE-KUBELET-CANARY\ *) return 0 ;; esac
	done
	return 1
}
rules() {
	n=0
	while IFS= read -r line; do
		case $line in -A\ *) n=$((n + 1)) ;; esac
	done
	echo "$n"
}
detect() {
	if iptables-nft-save -t mangle 2>/dev/null | hint || ip6tables-nft-save -t mangle 2>/dev/null | hint; then
		echo nft
	elif iptables-legacy-save 2>/dev/null | hint || ip6tables-legacy-save 2>/dev/null | hint; then
		echo legacy
	else
		legacy=$({ iptables-legacy-save; ip6tables-legacy-save; } 2>/dev/null | rules)
		nft=$({ iptables-nft-save; ip6tables-nft-save; } 2>/dev/null | rules)
		if [ "$legacy" -gt "$nft" ]; then echo legacy; else echo nft; fi
	fi
}
mode=
[ -f "$mode_file" ] && read -r mode <"$mode_file"
case $mode in
nft | legacy) ;;
*)
	mode=$(detect)
	echo "$mode" >"$mode_file"
	;;
esac
name=${0##*/}
case $name in
*-save) exec "$sbin/${name%-save}-$mode-save" "$@" ;;
*-restore) exec "$sbin/${name%-restore}-$mode-restore" "$@" ;;
*) exec "$sbin/$name-$mode" "$@" ;;
esac
`

// kubeProxyRecipe is registry.k8s.io/kube-proxy:v1.34.10, the reference proxy of the node runs
// (e2e/node, docs/conformance-testbed.md): the kube-proxy binary built here (make e2e-bins, v1.34.10)
// at /usr/local/bin/kube-proxy, where kubeadm's DaemonSet runs it, and what its IPVS mode runs
// on a node, from Debian 12's packages as upstream's base image (distroless-iptables, Debian 12)
// takes them: iptables (both backends) behind an iptables-wrapper that picks the node's, ipset
// (every KUBE-* set), kmod's modprobe (modprobe -va ip_vs at start), nft (the cleanup of the
// nftables mode's table at start; Debian's dynamically linked nft 1.0.6 where upstream builds
// a static, patched 1.1.3), dash and cat. Upstream's image also has grep, chmod, ln, rm, sleep,
// wc (for its wrapper's installer and one e2e test) and go-runner, which kubeadm's DaemonSet
// does not use.
func kubeProxyRecipe() recipe {
	sel := rootfs.Selection{
		Dirs: []rootfs.Dir{
			{Path: "usr/sbin", Mode: 0o755}, {Path: "usr/bin", Mode: 0o755}, {Path: "usr/local/bin", Mode: 0o755},
			{Path: "etc", Mode: 0o755}, {Path: "dev", Mode: 0o755}, {Path: "proc", Mode: 0o755}, {Path: "sys", Mode: 0o755},
			{Path: "run", Mode: 0o755}, {Path: "tmp", Mode: 0o777 | fs.ModeSticky}, {Path: "var/lib/kube-proxy", Mode: 0o755},
		},
		Copy: []string{
			"usr/sbin/xtables-nft-multi",
			"usr/sbin/xtables-legacy-multi",
			"usr/lib/*/xtables/*.so",
			"etc/protocols",
			"usr/sbin/ipset",
			"bin/kmod",
			"usr/sbin/nft",
			"bin/dash",
			"bin/cat",
		},
		Links: []rootfs.Link{
			{Path: "bin/sh", Target: "dash"},
			{Path: "sbin/modprobe", Target: "/bin/kmod"},
			{Path: "sbin/lsmod", Target: "/bin/kmod"},
		},
		Files:     []rootfs.File{{Path: "usr/sbin/iptables-wrapper", Data: iptablesWrapper, Mode: 0o755}},
		Multiarch: multiarch,
	}
	for _, t := range []string{"iptables", "ip6tables"} {
		for _, op := range []string{"", "-save", "-restore"} {
			sel.Links = append(sel.Links, rootfs.Link{Path: "usr/sbin/" + t + op, Target: "iptables-wrapper"})
			for _, m := range []string{"nft", "legacy"} {
				sel.Links = append(sel.Links, rootfs.Link{Path: "usr/sbin/" + t + "-" + m + op, Target: "xtables-" + m + "-multi"})
			}
		}
	}
	return recipe{
		Doc:       "kube-proxy v1.34.10 with iptables (nft and legacy, a wrapper picks), ipset, modprobe, nft from Debian 12; --input kube-proxy=.cache/k8s/kube-proxy",
		Packages:  []string{"iptables", "ipset", "kmod", "nftables", "dash", "coreutils"},
		Selection: sel,
		Inputs:    []input{{Name: "kube-proxy", Path: "usr/local/bin/kube-proxy", Mode: 0o755}},
		Config:    oci.Config{Entrypoint: []string{"/usr/local/bin/kube-proxy"}, Env: []string{defaultPath}},
		Names:     []string{"registry.k8s.io/kube-proxy:v1.34.10"},
	}
}
