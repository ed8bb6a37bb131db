package main

import (
	"io/fs"
	"sort"

	"github.com/kipvs/kipvs/hack/ociimage/oci"
	"github.com/kipvs/kipvs/hack/ociimage/rootfs"
)

// recipe is one image: Debian packages and the part of them it keeps (its lower layer), and
// files of this build (its upper layer), with what it runs.
type recipe struct {
	Doc string
	// Packages are fetched with their Depends closure, less Exclude (what the selection never
	// takes from: maintainer-script helpers a file copy does not need).
	Packages  []string
	Exclude   []string
	Selection rootfs.Selection
	// Inputs are this build's files, given as --input NAME=FILE.
	Inputs []input
	Config oci.Config
	// Names are the names the image gets when no --tag is given.
	Names []string
}

type input struct {
	Name string
	Path string
	Mode fs.FileMode
}

const multiarch = "x86_64-linux-gnu"

// defaultPath is the PATH the images set (what Docker's builder gives an image from scratch).
const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// recipes returns every image this tool builds, by name.
func recipes() map[string]recipe {
	return map[string]recipe{
		"kipvs":      kipvsRecipe(),
		"pause":      pauseRecipe(),
		"agnhost":    agnhostRecipe(),
		"coredns":    corednsRecipe(),
		"echo":       echoRecipe(),
		"kube-proxy": kubeProxyRecipe(),
	}
}

func recipeNames() []string {
	var out []string
	for n := range recipes() {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// kipvsRecipe is the kipvs image. kipvs runs exactly eight programs,
// {ip,ip6}tables-{nft,legacy}-{save,restore}; everything else (IPVS, ipsets, kube-ipvs0,
// conntrack, sysctls) it does over netlink and /proc. So the image holds those eight (links to
// the two xtables multi-call binaries), every iptables extension module (kipvs's own rules need
// a few, but it reads the node's whole ruleset with *-save, which must be able to print the
// other rules on the node as well), the shared libraries all of these load (with the loader),
// /etc/protocols for protocol names, and empty /dev, /proc, /sys (the runtime mounts them),
// /run (xtables.lock) and /tmp. No shell, no package manager, no ipvsadm, ipset or conntrack.
// deploy/Containerfile builds the same file system from the same recipe (ociimage rootfs) on a
// Debian 12 build stage; e2e/deploy's TestImageRootfs runs kipvs from the built archive.
func kipvsRecipe() recipe {
	sel := rootfs.Selection{
		Dirs: []rootfs.Dir{
			{Path: "usr/sbin", Mode: 0o755}, {Path: "usr/local/bin", Mode: 0o755}, {Path: "etc", Mode: 0o755},
			{Path: "dev", Mode: 0o755}, {Path: "proc", Mode: 0o755}, {Path: "sys", Mode: 0o755},
			{Path: "run", Mode: 0o755}, {Path: "tmp", Mode: 0o777 | fs.ModeSticky},
		},
		Copy: []string{
			"usr/sbin/xtables-nft-multi",
			"usr/sbin/xtables-legacy-multi",
			"usr/lib/*/xtables/*.so",
			"etc/protocols",
		},
		Multiarch: multiarch,
	}
	for _, m := range []string{"nft", "legacy"} {
		for _, t := range []string{"iptables", "ip6tables"} {
			for _, op := range []string{"save", "restore"} {
				sel.Links = append(sel.Links, rootfs.Link{Path: "usr/sbin/" + t + "-" + m + "-" + op, Target: "xtables-" + m + "-multi"})
			}
		}
	}
	return recipe{
		Doc:       "kipvs with iptables (nft and legacy) from Debian 12; --input kipvs=bin/kipvs",
		Packages:  []string{"iptables"},
		Selection: sel,
		Inputs:    []input{{Name: "kipvs", Path: "usr/local/bin/kipvs", Mode: 0o755}},
		Config:    oci.Config{Entrypoint: []string{"/usr/local/bin/kipvs"}, Cmd: []string{"run"}, Env: []string{defaultPath}},
		Names:     []string{"ghcr.io/kipvs/kipvs:dev"},
	}
}

// pauseRecipe is the pod sandbox image kubelet v1.34.10 and the e2e suite ask for
// (test/utils/image/manifest.go: registry.k8s.io/pause:3.10.1): one static binary, hack/pause,
// that waits for SIGINT or SIGTERM and reaps the children it inherits, run as 65535:65535 as
// upstream's is.
func pauseRecipe() recipe {
	return recipe{
		Doc:    "the pod sandbox image; --input pause=bin/pause (go build ./hack/pause)",
		Inputs: []input{{Name: "pause", Path: "pause", Mode: 0o755}},
		Config: oci.Config{Entrypoint: []string{"/pause"}, User: "65535:65535"},
		Names:  []string{"registry.k8s.io/pause:3.10.1"},
	}
}

// agnhostRecipe is the e2e suite's all-purpose test image, registry.k8s.io/e2e-test-images/agnhost:2.56
// (test/utils/image/manifest.go), on Debian 12 instead of upstream's Alpine: the agnhost binary
// built from k8s.io/kubernetes/test/images/agnhost v1.34.10 (e2e/k8s), the tools upstream's
// Dockerfile installs (curl, nc, ip and ss, dig, iperf, bash) and, in place of Alpine's busybox,
// Debian's dash, coreutils, grep, sed, findutils, hostname, procps, tar, gzip, wget and ping.
// Whole packages (less documentation), with the links their maintainer scripts would make
// (nc, awk) and the users and groups upstream's image defines. Differences from upstream: no
// CoreDNS binary at /coredns, GNU tools instead of busybox applets.
func agnhostRecipe() recipe {
	return recipe{
		Doc: "the e2e test image on Debian 12; --input agnhost=bin/agnhost --input porter-crt=... --input porter-key=... (test/images/agnhost/porter)",
		Packages: []string{"dash", "bash", "coreutils", "grep", "sed", "mawk", "findutils", "hostname", "procps", "tar", "gzip",
			"curl", "wget", "netcat-openbsd", "iproute2", "bind9-dnsutils", "iperf", "iputils-ping"},
		// Maintainer-script machinery and Perl, which no file copy needs.
		Exclude: []string{"debconf", "cdebconf", "debconf-2.0", "dpkg", "install-info", "init-system-helpers", "perl", "perl-base",
			"perl:any", "usrmerge", "usr-is-merged", "base-files", "debianutils", "libpam-runtime", "lsb-base", "sysvinit-utils"},
		Selection: rootfs.Selection{
			All:  true,
			Drop: []string{"usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/locale", "usr/share/lintian", "usr/share/bug", "usr/share/bash-completion"},
			Dirs: []rootfs.Dir{
				{Path: "dev", Mode: 0o755}, {Path: "proc", Mode: 0o755}, {Path: "sys", Mode: 0o755}, {Path: "run", Mode: 0o755},
				{Path: "tmp", Mode: 0o777 | fs.ModeSticky}, {Path: "root", Mode: 0o700}, {Path: "uploads", Mode: 0o755},
				{Path: "home/user-defined-in-image", Mode: 0o755},
			},
			Links: []rootfs.Link{
				{Path: "bin/nc", Target: "nc.openbsd"},
				{Path: "usr/bin/awk", Target: "mawk"},
				{Path: "usr/local/bin/iperf", Target: "/usr/bin/iperf"},
				{Path: "agnhost-2", Target: "agnhost"},
			},
			Files: []rootfs.File{
				{Path: "etc/passwd", Mode: 0o644, Data: "root:x:0:0:root:/root:/bin/bash\n" +
					"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n" +
					"user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh\n"},
				{Path: "etc/group", Mode: 0o644, Data: "root:x:0:\nnogroup:x:65534:\nuser-defined-in-image:x:1000:\n" +
					"group-defined-in-image:x:50000:user-defined-in-image\n"},
			},
		},
		Inputs: []input{
			{Name: "agnhost", Path: "agnhost", Mode: 0o755},
			{Name: "porter-crt", Path: "localhost.crt", Mode: 0o644},
			{Name: "porter-key", Path: "localhost.key", Mode: 0o644},
		},
		Config: oci.Config{Entrypoint: []string{"/agnhost"}, Cmd: []string{"pause"}, Env: []string{defaultPath}},
		Names:  []string{"registry.k8s.io/e2e-test-images/agnhost:2.56"},
	}
}

// corednsRecipe is the cluster DNS image under kubeadm v1.34.10's name
// (cmd/kubeadm/app/constants: registry.k8s.io/coredns/coredns:v1.12.1): one static coredns
// binary, built elsewhere from its Go module. Unlike upstream's (distroless, user nonroot, a
// cap_net_bind_service file capability to bind port 53) it runs as root and carries no CA
// certificates: this tool writes no extended attributes, and the cluster is offline.
func corednsRecipe() recipe {
	return recipe{
		Doc:    "CoreDNS; --input coredns=FILE (a static coredns binary)",
		Inputs: []input{{Name: "coredns", Path: "coredns", Mode: 0o755}},
		Config: oci.Config{Entrypoint: []string{"/coredns"}},
		Names:  []string{"registry.k8s.io/coredns/coredns:v1.12.1"},
	}
}

// echoRecipe is e2e/echo alone (/echo, static): the node smoke's (e2e/node) backend and client.
func echoRecipe() recipe {
	return recipe{
		Doc:    "e2e/echo, the node smoke's backend and client; --input echo=bin/echo",
		Inputs: []input{{Name: "echo", Path: "echo", Mode: 0o755}},
		Config: oci.Config{Entrypoint: []string{"/echo"}},
		Names:  []string{"localhost/kipvs-e2e-echo:dev"},
	}
}
