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

// recipes returns every image this tool builds, by name.
func recipes() map[string]recipe {
	return map[string]recipe{
		"kipvs": kipvsRecipe(),
		"pause": pauseRecipe(),
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
		Config:    oci.Config{Entrypoint: []string{"/usr/local/bin/kipvs"}, Cmd: []string{"run"}},
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
