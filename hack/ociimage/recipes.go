package main

import (
	"io/fs"
	"slices"
	"sort"
	"strings"

	"github.com/kipvs/kipvs/hack/ociimage/oci"
	"github.com/kipvs/kipvs/hack/ociimage/rootfs"
	"github.com/kipvs/kipvs/internal/netfilter"
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
		"kipvs":   kipvsRecipe(),
		"pause":   pauseRecipe(),
		"agnhost": agnhostRecipe(),
		"coredns": corednsRecipe(),
		"echo":    echoRecipe(),
		// The other images the e2e suite's default selection (docs/conformance-testbed.md) runs.
		"jessie-dnsutils":        jessieDnsutilsRecipe(),
		"busybox":                busyboxRecipe(),
		"regression-issue-74839": regressionIssue74839Recipe(),
		"distroless-iptables":    distrolessIptablesRecipe(),
		"kube-proxy":             kubeProxyRecipe(),
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

// kipvsRecipe is the kipvs image. kipvs runs exactly eight programs with the iptables filter
// backend, {ip,ip6}tables-{nft,legacy}-{save,restore}, and one with the nftables backend,
// nft (nftables 1.0.6); everything else (IPVS, ipsets, kube-ipvs0,
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
			"usr/sbin/nft",
			"usr/lib/*/xtables/*.so",
			"etc/protocols",
		},
		Multiarch: multiarch,
	}
	for _, m := range []netfilter.Mode{netfilter.ModeNFT, netfilter.ModeLegacy} {
		for _, p := range netfilter.Programs(m) {
			sel.Links = append(sel.Links, rootfs.Link{Path: "usr/sbin/" + p, Target: "xtables-" + string(m) + "-multi"})
		}
	}
	return recipe{
		Doc:       "kipvs with iptables (nft and legacy) and nft from Debian 12; --input kipvs=bin/kipvs",
		Packages:  []string{"iptables", "nftables"},
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
// Debian's dash, coreutils, grep, sed, findutils, hostname, procps, tar, gzip, wget and ping, with
// getent (libc-bin; Alpine's musl-utils has it: the DNS tests' /etc/hosts probe runs it) and nsenter
// (util-linux; busybox's applet upstream: the suite's hostexec pods enter the node with it).
// Whole packages (less documentation), with the links their maintainer scripts would make
// (nc, awk) and the users and groups upstream's image defines, and CoreDNS at /coredns (the DNS
// tests' own name servers run it: upstream's image has v1.6.2, this one make image-coredns's
// v1.12.1). Differences from upstream: that CoreDNS version, GNU tools instead of busybox applets.
func agnhostRecipe() recipe {
	return recipe{
		Doc: "the e2e test image on Debian 12; --input agnhost=bin/agnhost --input coredns=bin/coredns --input porter-crt=... --input porter-key=... (test/images/agnhost/porter)",
		Packages: []string{"dash", "bash", "coreutils", "grep", "sed", "mawk", "findutils", "hostname", "procps", "tar", "gzip",
			"curl", "wget", "netcat-openbsd", "iproute2", "bind9-dnsutils", "iperf", "iputils-ping", "libc-bin", "util-linux"},
		Exclude: maintainerMachinery,
		Selection: rootfs.Selection{
			All:  true,
			Drop: docDirs,
			Dirs: append(runtimeDirs(), rootfs.Dir{Path: "uploads", Mode: 0o755}, rootfs.Dir{Path: "home/user-defined-in-image", Mode: 0o755}),
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
				{Path: "etc/nsswitch.conf", Mode: 0o644, Data: nsswitchConf},
				// GNU wget retries a timed-out request 20 times; busybox's wget (upstream's) tries once.
				{Path: "etc/wgetrc", Mode: 0o644, Data: "tries = 1\n"},
			},
		},
		Inputs: []input{
			{Name: "agnhost", Path: "agnhost", Mode: 0o755},
			{Name: "coredns", Path: "coredns", Mode: 0o755},
			{Name: "porter-crt", Path: "localhost.crt", Mode: 0o644},
			{Name: "porter-key", Path: "localhost.key", Mode: 0o644},
		},
		Config: oci.Config{Entrypoint: []string{"/agnhost"}, Cmd: []string{"pause"}, Env: []string{defaultPath}},
		Names:  []string{"registry.k8s.io/e2e-test-images/agnhost:2.56"},
	}
}

// maintainerMachinery is what the Debian-based test images leave out of their packages' Depends
// closure: maintainer-script machinery and Perl, which no file copy needs.
var maintainerMachinery = []string{"debconf", "cdebconf", "debconf-2.0", "dpkg", "install-info", "init-system-helpers", "perl", "perl-base",
	"perl:any", "usrmerge", "usr-is-merged", "base-files", "debianutils", "libpam-runtime", "lsb-base", "sysvinit-utils"}

// docDirs are the package documentation the Debian-based test images drop.
var docDirs = []string{"usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/locale", "usr/share/lintian", "usr/share/bug", "usr/share/bash-completion"}

// runtimeDirs are the directories a container runtime mounts over or a process writes into.
func runtimeDirs() []rootfs.Dir {
	return []rootfs.Dir{
		{Path: "dev", Mode: 0o755}, {Path: "proc", Mode: 0o755}, {Path: "sys", Mode: 0o755}, {Path: "run", Mode: 0o755},
		{Path: "tmp", Mode: 0o777 | fs.ModeSticky}, {Path: "root", Mode: 0o700},
	}
}

// nsswitchConf makes glibc read /etc/hosts (which kubelet writes) before DNS, as musl (upstream's
// Alpine images) always does; without the file glibc asks DNS first and stops at its NXDOMAIN.
const nsswitchConf = "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nnetworks: files\nprotocols: files\nservices: files\n"

const (
	rootPasswd = "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
	rootGroup  = "root:x:0:\nnogroup:x:65534:\n"
)

// jessieDnsutilsRecipe is the DNS tests' second prober, registry.k8s.io/e2e-test-images/jessie-dnsutils:1.7
// (test/utils/image/manifest.go). Upstream's is Debian 8 (jessie) with dnsutils and a CoreDNS
// binary; this one is Debian 12 with what the probers run (test/e2e/network/dns_common.go: sh,
// seq, sleep, test, echo, dig, getent) and a little more (bash, grep, sed, awk, hostname, find).
// No /coredns: no test the selection runs uses the one in this image.
func jessieDnsutilsRecipe() recipe {
	return recipe{
		Doc:      "the DNS tests' jessie prober on Debian 12 (dig, getent, sh); no inputs",
		Packages: []string{"dash", "bash", "coreutils", "grep", "sed", "mawk", "findutils", "hostname", "libc-bin", "bind9-dnsutils"},
		Exclude:  maintainerMachinery,
		Selection: rootfs.Selection{
			All:   true,
			Drop:  docDirs,
			Dirs:  runtimeDirs(),
			Links: []rootfs.Link{{Path: "usr/bin/awk", Target: "mawk"}},
			Files: []rootfs.File{
				{Path: "etc/passwd", Mode: 0o644, Data: rootPasswd},
				{Path: "etc/group", Mode: 0o644, Data: rootGroup},
				{Path: "etc/nsswitch.conf", Mode: 0o644, Data: nsswitchConf},
			},
		},
		Config: oci.Config{Cmd: []string{"bash"}, Env: []string{defaultPath}},
		Names:  []string{"registry.k8s.io/e2e-test-images/jessie-dnsutils:1.7"},
	}
}

// busyboxApplets are the applets of Debian 12's busybox-static (busybox --list) that the busybox
// image links into /bin, as upstream's busybox image links all of its own.
const busyboxApplets = "[ [[ acpid adjtimex ar arch arp arping ascii ash awk base64 basename bc blkdiscard blockdev brctl " +
	"bunzip2 bzcat bzip2 cal cat chgrp chmod chown chroot chvt clear cmp cp cpio crc32 crond crontab cttyhack cut date dc dd " +
	"deallocvt depmod devmem df diff dirname dmesg dnsdomainname dos2unix du dumpkmap dumpleases echo ed egrep env expand expr " +
	"factor fallocate false fatattr fdisk fgrep find findfs fold free freeramdisk fsfreeze fstrim ftpget ftpput getopt getty grep " +
	"groups gunzip gzip halt head hexdump hostid hostname httpd hwclock i2cdetect i2cdump i2cget i2cset i2ctransfer id ifconfig " +
	"ifdown ifup init insmod ionice ip ipcalc ipneigh kill killall klogd last less link linux32 linux64 linuxrc ln loadfont " +
	"loadkmap logger login logname logread losetup ls lsmod lsscsi lzcat lzma lzop md5sum mdev microcom mim mkdir mkdosfs mke2fs " +
	"mkfifo mknod mkpasswd mkswap mktemp modinfo modprobe more mount mt mv nameif nc netstat nl nologin nproc nsenter nslookup " +
	"nuke od openvt partprobe passwd paste patch pidof ping ping6 pivot_root poweroff printf ps pwd rdate readlink realpath " +
	"reboot renice reset resume rev rm rmdir rmmod route run-init run-parts sed seq setkeycodes setpriv setsid sh sha1sum " +
	"sha256sum sha3sum sha512sum shred shuf sleep sort ssl_client start-stop-daemon stat strings stty su sulogin svc svok " +
	"swapoff swapon switch_root sync sysctl syslogd tac tail tar taskset tc tee telnet telnetd test tftp time timeout top touch " +
	"tr traceroute traceroute6 true truncate ts tty tunctl ubirename udhcpc udhcpd uevent umount uname uncompress unexpand uniq " +
	"unix2dos unlink unlzma unshare unxz unzip uptime usleep uudecode uuencode vconfig vi w watch watchdog wc wget which who " +
	"whoami xargs xxd xz xzcat yes zcat"

// busyboxRecipe is registry.k8s.io/e2e-test-images/busybox:1.37.0-1 (test/utils/image/manifest.go):
// Debian 12's busybox-static (1.35, not 1.37) at /bin/busybox with its applets linked in /bin, as
// upstream's (busybox:1.37.0) has them. The Conntrack tests run sh, echo, sleep and nc in it.
func busyboxRecipe() recipe {
	sel := rootfs.Selection{
		Copy:      []string{"bin/busybox"},
		Multiarch: multiarch, // busybox-static loads no libraries
		Dirs:      append(runtimeDirs(), rootfs.Dir{Path: "bin", Mode: 0o755}, rootfs.Dir{Path: "etc", Mode: 0o755}),
		Files:     []rootfs.File{{Path: "etc/passwd", Mode: 0o644, Data: rootPasswd}, {Path: "etc/group", Mode: 0o644, Data: rootGroup}},
	}
	for _, a := range strings.Fields(busyboxApplets) {
		sel.Links = append(sel.Links, rootfs.Link{Path: "bin/" + a, Target: "busybox"})
	}
	return recipe{
		Doc:       "busybox (Debian 12's busybox-static, applets linked in /bin); no inputs",
		Packages:  []string{"busybox-static"},
		Selection: sel,
		Config:    oci.Config{Cmd: []string{"sh"}, Env: []string{defaultPath}},
		Names:     []string{"registry.k8s.io/e2e-test-images/busybox:1.37.0-1"},
	}
}

// regressionIssue74839Recipe is registry.k8s.io/e2e-test-images/regression-issue-74839:1.2, the
// Conntrack invalid-state test's server: the static binary from
// k8s.io/kubernetes/test/images/regression-issue-74839 v1.34.10 (e2e/k8s) alone (upstream's adds
// it to a Debian 12 base it never uses).
func regressionIssue74839Recipe() recipe {
	return recipe{
		Doc:    "the conntrack invalid-state test's server; --input regression-issue-74839=FILE",
		Inputs: []input{{Name: "regression-issue-74839", Path: "regression-issue-74839", Mode: 0o755}},
		Config: oci.Config{Entrypoint: []string{"/regression-issue-74839"}},
		Names:  []string{"registry.k8s.io/e2e-test-images/regression-issue-74839:1.2"},
	}
}

// distrolessIptablesRecipe is registry.k8s.io/build-image/distroless-iptables:v0.8.14, which the
// KubeProxy CLOSE_WAIT test runs as a privileged hostNetwork pod (sleep 600), reading the node's
// conntrack table through sh, test, cat, grep, which and conntrack. Debian 12's iptables, ipset
// and conntrack with those tools (upstream's is a distroless Debian image with iptables, ipset
// and conntrack too).
func distrolessIptablesRecipe() recipe {
	exclude := slices.DeleteFunc(slices.Clone(maintainerMachinery), func(p string) bool { return p == "debianutils" })
	return recipe{
		Doc:      "iptables, ipset and conntrack with sh and coreutils; no inputs",
		Packages: []string{"iptables", "ipset", "conntrack", "dash", "coreutils", "grep", "debianutils"},
		Exclude:  exclude,
		Selection: rootfs.Selection{
			All:  true,
			Drop: docDirs,
			Dirs: runtimeDirs(),
			// The links update-alternatives would make: iptables in nft mode, which.
			Links: []rootfs.Link{
				{Path: "usr/sbin/iptables", Target: "iptables-nft"}, {Path: "usr/sbin/iptables-save", Target: "iptables-nft-save"},
				{Path: "usr/sbin/iptables-restore", Target: "iptables-nft-restore"}, {Path: "usr/sbin/ip6tables", Target: "ip6tables-nft"},
				{Path: "usr/sbin/ip6tables-save", Target: "ip6tables-nft-save"}, {Path: "usr/sbin/ip6tables-restore", Target: "ip6tables-nft-restore"},
				{Path: "usr/bin/which", Target: "which.debianutils"},
			},
			Files: []rootfs.File{
				{Path: "etc/passwd", Mode: 0o644, Data: rootPasswd}, {Path: "etc/group", Mode: 0o644, Data: rootGroup},
				{Path: "etc/nsswitch.conf", Mode: 0o644, Data: nsswitchConf},
			},
		},
		Config: oci.Config{Env: []string{defaultPath}},
		Names:  []string{"registry.k8s.io/build-image/distroless-iptables:v0.8.14"},
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
