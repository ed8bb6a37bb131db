//go:build e2e

package deploy

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/kipvs/kipvs/e2e/harness"
	"github.com/kipvs/kipvs/hack/ociimage/oci"
)

// imageFiles are the only files the image may hold besides directories: kipvs, the two
// xtables multi-call binaries and the eight tool names kipvs runs (symlinks to them), nft (the
// nftables filter backend's program), the
// iptables extension modules, shared libraries with the loader, and /etc/protocols.
var imageFiles = regexp.MustCompile(`^(` +
	`usr/local/bin/kipvs|` +
	`usr/sbin/xtables-(nft|legacy)-multi|` +
	`usr/sbin/ip6?tables-(nft|legacy)(-(save|restore))?|` +
	`usr/sbin/nft|` +
	`usr/lib/[^/]+/xtables/lib[A-Za-z0-9_]+\.so|` +
	`lib(64)?/([^/]+/)?(ld-linux-x86-64|lib[a-z0-9_]+)\.so(\.[0-9]+)*|` +
	`etc/protocols` +
	`)$`)

// TestImageRootfs unpacks the kipvs image that ships, the OCI archive `make image` writes
// (KIPVS_IMAGE_ARCHIVE, from hack/ociimage's kipvs recipe), as a container runtime would, and
// proves it is what kipvs needs and nothing more (issue 6: a minimal base with iptables, nft
// and legacy, and nothing kipvs does not need): it holds only the files listed above (no
// shell, no package manager, no ipvsadm or ipset); kipvs run from a chroot of it with the
// image's own entrypoint and command programs the real kernel, iptables rules with every match
// and target it uses included, on the nft backend and then on the legacy one (chosen by kipvs
// because of a kubelet hint chain there, as on a legacy node); and `kipvs cleanup` from the
// chroot removes it all again. The chroot's root is read-only, as the DaemonSet's
// readOnlyRootFilesystem makes it, with only /run writable.
func TestImageRootfs(t *testing.T) {
	e := loadEnv(t)
	archive := os.Getenv("KIPVS_IMAGE_ARCHIVE")
	if archive == "" {
		t.Fatal("KIPVS_IMAGE_ARCHIVE is not set: run through make test-e2e, which builds it (make image-archive)")
	}
	img, err := oci.ReadArchiveFile(archive)
	if err != nil {
		t.Fatalf("the image archive: %v", err)
	}
	root := filepath.Join(t.TempDir(), "rootfs")
	if err := img.Unpack(root); err != nil {
		t.Fatalf("unpack %s: %v", archive, err)
	}
	t.Logf("image %s (%s): %d layers", img.ManifestDigest, archive, len(img.Layers))
	bin, err := os.ReadFile(e.kipvs)
	if err != nil {
		t.Fatal(err)
	}
	if shipped, err := os.ReadFile(filepath.Join(root, "usr/local/bin/kipvs")); err != nil || !bytes.Equal(shipped, bin) {
		t.Fatalf("the image's /usr/local/bin/kipvs is not %s (%v): the archive is stale, make image-archive", e.kipvs, err)
	}
	entrypoint := append(slices.Clone(img.Config.Config.Entrypoint), img.Config.Config.Cmd...)
	if want := []string{"/usr/local/bin/kipvs", "run"}; !slices.Equal(entrypoint, want) {
		t.Fatalf("the image runs %q, want %q", entrypoint, want)
	}

	var files, extra []string
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		files = append(files, rel)
		if !imageFiles.MatchString(rel) {
			extra = append(extra, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(extra) > 0 {
		t.Errorf("the image holds files kipvs does not need:\n%s", strings.Join(extra, "\n"))
	}
	for _, want := range []string{"usr/sbin/iptables-nft-restore", "usr/sbin/ip6tables-legacy-save", "usr/sbin/nft", "etc/protocols"} {
		if !slices.Contains(files, want) {
			t.Errorf("the image lacks %s", want)
		}
	}
	for _, absent := range []string{"bin/sh", "usr/bin/sh", "usr/bin/apt-get", "usr/bin/dpkg", "usr/sbin/ipvsadm", "usr/sbin/ipset"} {
		if _, err := os.Lstat(filepath.Join(root, absent)); err == nil {
			t.Errorf("the image holds %s", absent)
		}
	}
	t.Logf("image file system: %d files besides directories", len(files))

	services, err := os.ReadFile(filepath.Join(filepath.Dir(e.deployDir), "e2e", "demo", "services.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "tmp", "services.yaml"), services, 0o644); err != nil {
		t.Fatal(err)
	}

	// The DaemonSet runs the image with readOnlyRootFilesystem: the chroot's root is a
	// read-only bind mount of it, and the only writable place is /run, a tmpfs standing for
	// the DaemonSet's /run/xtables.lock hostPath (iptables-legacy's lock file).
	if err := syscall.Mount(root, root, "", syscall.MS_BIND, ""); err != nil {
		t.Fatalf("bind mount %s: %v", root, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(root, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", root, err)
		}
	})
	if err := syscall.Mount("", root, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
		t.Fatalf("remount %s read-only: %v", root, err)
	}
	if err := os.WriteFile(filepath.Join(root, "tmp", "probe"), nil, 0o644); err == nil {
		t.Fatal("the chroot's root file system is writable")
	}
	// What a container runtime provides: /dev (kipvs starts iptables with its stdin on
	// /dev/null), /proc and /sys; and the DaemonSet's writable /run/xtables.lock.
	for _, m := range []struct{ fstype, dir string }{{"devtmpfs", "dev"}, {"proc", "proc"}, {"sysfs", "sys"}, {"tmpfs", "run"}} {
		dir := filepath.Join(root, m.dir)
		if err := syscall.Mount(m.fstype, dir, m.fstype, 0, ""); err != nil {
			t.Fatalf("mount %s on %s: %v", m.fstype, dir, err)
		}
		t.Cleanup(func() {
			if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
				t.Errorf("unmount %s: %v", dir, err)
			}
		})
	}
	const vip = "10.96.0.10:80"
	chrootKipvs := func(args ...string) []string {
		return append([]string{root, img.Config.Config.Entrypoint[0]}, args...)
	}

	for _, mode := range []string{"nft", "legacy"} {
		t.Run(mode, func(t *testing.T) {
			other := map[string]string{"nft": "legacy", "legacy": "nft"}[mode]
			if mode == "legacy" {
				if out, err := harness.Run("iptables-legacy", "-t", "mangle", "-N", "KUBE-IPTABLES-HINT"); err != nil {
					t.Fatalf("%v\n%s", err, out)
				}
				t.Cleanup(func() {
					if out, err := harness.Run("iptables-legacy", "-t", "mangle", "-X", "KUBE-IPTABLES-HINT"); err != nil {
						t.Errorf("%v\n%s", err, out)
					}
				})
			}
			k := startKipvs(t, "chroot", chrootKipvs(img.Config.Config.Cmd[0], "--kipvs-source-file", "/tmp/services.yaml",
				"--hostname-override", "image-node", "--cluster-cidr", "10.244.0.0/16")...)
			k.Until(t, startLimit, "kipvs in the image's file system programs "+vip+" and iptables-"+mode, func() (bool, string) {
				if last, err := lastSync(); err != nil || last.IsZero() {
					return false, "no sync yet"
				}
				if _, err := realServers(vip); err != nil {
					return false, err.Error()
				}
				save, err := harness.Run("iptables-" + mode + "-save")
				if err != nil {
					return false, err.Error()
				}
				// --random-fully: kipvs asked iptables-MODE for its version (the image once
				// shipped only the -save/-restore programs, so the real node's MASQUERADE had no
				// --random-fully and its IPv6 family never ran).
				for _, want := range []string{":KUBE-SERVICES", "--match-set KUBE-CLUSTER-IP dst,dst", "-j MASQUERADE --random-fully"} {
					if !strings.Contains(save, want) {
						return false, "iptables-" + mode + "-save lacks " + want
					}
				}
				save6, err := harness.Run("ip6tables-" + mode + "-save")
				if err != nil {
					return false, err.Error()
				}
				if !strings.Contains(save6, ":KUBE-SERVICES") {
					return false, "ip6tables-" + mode + "-save lacks :KUBE-SERVICES: the IPv6 family did not run"
				}
				return true, ""
			})
			if save, err := harness.Run("iptables-" + other + "-save"); err != nil || strings.Contains(save, ":KUBE-SERVICES") {
				t.Errorf("kipvs wrote its rules to iptables-%s too (or it cannot be read: %v)", other, err)
			}
			k.Stop(t) // fails the test unless kipvs exits with status 0
			if out, err := harness.Run("chroot", chrootKipvs("cleanup")...); err != nil {
				t.Fatalf("kipvs cleanup in the image's file system: %v\n%s", err, out)
			}
			for _, save := range []string{"iptables-" + mode + "-save", "ip6tables-" + mode + "-save"} {
				if out, err := harness.Run(save); err != nil || strings.Contains(out, ":KUBE-SERVICES") {
					t.Errorf("%s after cleanup (%v):\n%s", save, err, out)
				}
			}
			if out, err := harness.Run("ipvsadm", "-Sn"); err != nil || strings.TrimSpace(out) != "" {
				t.Errorf("ipvsadm -Sn after cleanup (%v):\n%s", err, out)
			}
		})
	}

	// The nftables filter backend from the image: its nft writes table ip kipvs, and no
	// KUBE- chain appears in either iptables.
	t.Run("nftables-backend", func(t *testing.T) {
		k := startKipvs(t, "chroot", chrootKipvs(img.Config.Config.Cmd[0], "--kipvs-source-file", "/tmp/services.yaml",
			"--hostname-override", "image-node", "--cluster-cidr", "10.244.0.0/16", "--kipvs-filter-backend=nftables")...)
		k.Until(t, startLimit, "kipvs in the image's file system programs "+vip+" and table ip kipvs", func() (bool, string) {
			if _, err := realServers(vip); err != nil {
				return false, err.Error()
			}
			out, err := harness.Run("nft", "list", "table", "ip", "kipvs")
			if err != nil || !strings.Contains(out, "chain services") {
				return false, fmt.Sprintf("nft list table ip kipvs (%v):\n%s", err, out)
			}
			return true, ""
		})
		for _, save := range []string{"iptables-nft-save", "iptables-legacy-save"} {
			if out, err := harness.Run(save); err != nil || strings.Contains(out, "KUBE-") {
				t.Errorf("%s with the nftables backend (%v):\n%s", save, err, out)
			}
		}
		k.Stop(t)
		if out, err := harness.Run("chroot", chrootKipvs("cleanup")...); err != nil {
			t.Fatalf("kipvs cleanup in the image's file system: %v\n%s", err, out)
		}
		if out, err := harness.Run("nft", "list", "tables"); err != nil || strings.Contains(out, "kipvs") {
			t.Errorf("nft list tables after cleanup (%v):\n%s", err, out)
		}
	})
}
