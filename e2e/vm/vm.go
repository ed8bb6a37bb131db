package vm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// DefaultModules are loaded in the VM before the script runs (crc32c_generic is always
// loaded first by init, and dummy with numdummies=0).
func DefaultModules() []string {
	return []string{
		"ip_vs", "ip_vs_rr", "ip_vs_wrr", "ip_vs_lc", "ip_vs_wlc", "ip_vs_sh", "ip_vs_dh", "ip_vs_mh",
		"ip_vs_sed", "ip_vs_nq", "ip_vs_ftp",
		"veth", "bridge", "br_netfilter", "sctp",
		"ip_set", "ip_set_hash_ip", "ip_set_hash_ipport", "ip_set_hash_ipportip", "ip_set_hash_ipportnet",
		"ip_set_hash_net", "ip_set_bitmap_port", "xt_set",
		"nf_tables", "nft_compat", "nft_chain_nat", "iptable_nat", "iptable_filter", "ip6table_nat",
		"ip6table_filter", "xt_MASQUERADE", "xt_mark", "xt_comment", "xt_addrtype", "xt_conntrack",
		"xt_ipvs", "xt_multiport", "ipt_REJECT", "ip6t_REJECT", "xt_nat", "xt_physdev", "nf_conntrack_netlink",
	}
}

// Net gives the VM restricted user networking whose only path out is a guestfwd from
// 10.0.2.100:6443 in the guest to 127.0.0.1:HostPort on the host; or, with Tap set, one
// virtio NIC on that host tap device instead (the caller creates the tap and addresses both
// ends: the guest's eth0 is left down and unaddressed for the script to configure, and
// virtio_net must be among Config.Modules).
type Net struct {
	HostPort int
	Tap      string
	MAC      string // the guest NIC's MAC address with Tap (default: qemu's)
}

// GuestStop is the file, inside the VM, that appears when Config.Stop is closed: a script
// that serves until the host is done waits for it and then exits.
const GuestStop = "/run/vm/stop"

// GuestArtifacts is the directory, inside the VM, whose files Run copies to
// Config.Artifacts on the host (it is on the VM's writable share; the script creates it).
const GuestArtifacts = "/run/vm/artifacts"

// Config describes one VM run.
type Config struct {
	CacheDir string        // holds "current" and <kver>/ from prepare.sh
	Script   string        // shell script run inside the VM (chrooted into the host root)
	WorkDir  string        // directory the script starts in (a host path)
	Timeout  time.Duration // whole run, boot included
	Net      *Net          // nil: no network device at all
	MemoryMB int
	CPUs     int
	Modules  []string // nil: DefaultModules()
	Console  io.Writer
	// Artifacts, when set, is a host directory that receives, after the run, what the
	// script wrote under GuestArtifacts (the same relative paths; existing files replaced).
	Artifacts string
	// Stop, when closed, makes GuestStop appear in the VM; the run still ends only when the
	// script exits (or Timeout passes).
	Stop <-chan struct{}
}

// Result is what the script left behind.
type Result struct {
	ExitCode int
	Output   string
	Elapsed  time.Duration
}

// ErrNoResult means the VM ended without the script reporting an exit code (boot
// failure, crash or timeout). It is always a test failure.
var ErrNoResult = errors.New("vm: no result from the VM")

// Run boots the VM, runs cfg.Script and returns its exit code and output.
func Run(ctx context.Context, cfg Config) (Result, error) {
	start := time.Now()
	if cfg.Timeout == 0 {
		cfg.Timeout = 20 * time.Minute
	}
	if cfg.MemoryMB == 0 {
		cfg.MemoryMB = 3072
	}
	if cfg.CPUs == 0 {
		cfg.CPUs = 2
	}
	if cfg.Modules == nil {
		cfg.Modules = DefaultModules()
	}
	if cfg.Console == nil {
		cfg.Console = io.Discard
	}
	cache, err := filepath.Abs(cfg.CacheDir)
	if err != nil {
		return Result{}, err
	}
	// The VM's init resolves paths under its view of the host root: a symbolic link to an
	// absolute path (a worktree's .cache/vm) must be resolved here.
	if resolved, err := filepath.EvalSymlinks(cache); err == nil {
		cache = resolved
	}
	kverB, err := os.ReadFile(filepath.Join(cache, "current"))
	if err != nil {
		return Result{}, fmt.Errorf("vm: kernel cache not prepared (run e2e/vm/prepare.sh %s): %w", cache, err)
	}
	kver := strings.TrimSpace(string(kverB))
	kdir := filepath.Join(cache, kver)
	workdir := cfg.WorkDir
	if workdir == "" {
		workdir, _ = os.Getwd()
	}
	if workdir, err = filepath.Abs(workdir); err != nil {
		return Result{}, err
	}

	out, err := os.MkdirTemp("", "kipvs-vm-")
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(out)
	netFlag := "0"
	if cfg.Net != nil && cfg.Net.Tap == "" {
		netFlag = "1"
	}
	env := fmt.Sprintf("VM_MODULES=%s\nVM_LOAD_MODULES=%q\nVM_NET=%s\nVM_WORKDIR=%s\n",
		filepath.Join(kdir, "lib", "modules", kver), strings.Join(cfg.Modules, " "), netFlag, workdir)
	if err := os.WriteFile(filepath.Join(out, "env"), []byte(env), 0o644); err != nil {
		return Result{}, err
	}
	if err := os.WriteFile(filepath.Join(out, "cmd.sh"), []byte(cfg.Script), 0o755); err != nil {
		return Result{}, err
	}

	args := []string{
		"-accel", "tcg,thread=multi", "-cpu", "max",
		"-m", strconv.Itoa(cfg.MemoryMB), "-smp", strconv.Itoa(cfg.CPUs),
		"-nographic", "-no-reboot",
		"-kernel", filepath.Join(kdir, "vmlinuz"),
		"-initrd", filepath.Join(kdir, "initramfs.cpio.gz"),
		"-append", "console=ttyS0 quiet panic=-1",
		"-virtfs", "local,path=/,mount_tag=host,security_model=none,readonly=on,multidevs=remap",
		"-virtfs", "local,path=" + out + ",mount_tag=out,security_model=none",
	}
	switch {
	case cfg.Net == nil:
		args = append(args, "-nic", "none")
	case cfg.Net.Tap != "":
		dev := "virtio-net-pci,netdev=n0,romfile="
		if cfg.Net.MAC != "" {
			dev += ",mac=" + cfg.Net.MAC
		}
		args = append(args,
			"-netdev", fmt.Sprintf("tap,id=n0,ifname=%s,script=no,downscript=no", cfg.Net.Tap),
			"-device", dev)
	default:
		args = append(args,
			"-netdev", fmt.Sprintf("user,id=n0,restrict=on,net=10.0.2.0/24,guestfwd=tcp:10.0.2.100:6443-cmd:socat STDIO TCP:127.0.0.1:%d", cfg.Net.HostPort),
			"-device", "virtio-net-pci,netdev=n0,romfile=")
	}

	rctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	cmd := exec.CommandContext(rctx, "qemu-system-x86_64", args...)
	var console bytes.Buffer
	w := io.MultiWriter(&console, cfg.Console)
	cmd.Stdout, cmd.Stderr = w, w
	cmd.Stdin = nil
	cmd.WaitDelay = 5 * time.Second
	var runErr error
	if err := cmd.Start(); err != nil {
		runErr = err
	} else {
		waited := make(chan struct{})
		if cfg.Stop != nil {
			go func() {
				select {
				case <-cfg.Stop:
					_ = os.WriteFile(filepath.Join(out, filepath.Base(GuestStop)), nil, 0o644)
				case <-waited:
				}
			}()
		}
		runErr = cmd.Wait()
		close(waited)
	}

	res := Result{ExitCode: -1, Elapsed: time.Since(start)}
	if b, err := os.ReadFile(filepath.Join(out, "output")); err == nil {
		res.Output = string(b)
	}
	var copyErr error
	if cfg.Artifacts != "" {
		copyErr = copyTree(filepath.Join(out, filepath.Base(GuestArtifacts)), cfg.Artifacts)
	}
	rc, rcErr := os.ReadFile(filepath.Join(out, "rc"))
	if rcErr != nil {
		why := "VM ended without a result"
		if rctx.Err() != nil {
			why = fmt.Sprintf("VM timed out after %s", cfg.Timeout)
		}
		if b, err := os.ReadFile(filepath.Join(out, "init-error")); err == nil {
			why = "VM init failed: " + strings.TrimSpace(string(b))
		}
		return res, fmt.Errorf("%w: %s (qemu: %v)\n--- console tail ---\n%s", ErrNoResult, why, runErr, tail(console.String(), 60))
	}
	res.ExitCode, err = strconv.Atoi(strings.TrimSpace(string(rc)))
	if err != nil {
		return res, fmt.Errorf("%w: bad exit code %q", ErrNoResult, rc)
	}
	return res, copyErr
}

// copyTree copies the regular files and directories under src into dst (created as
// needed); a missing src copies nothing.
func copyTree(src, dst string) error {
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == src && errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll
			}
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o755)
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(to, b, 0o644)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("vm: copy the artifacts to %s: %w", dst, err)
	}
	return nil
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Prepare runs e2e/vm/prepare.sh (found relative to the working directory, the repository
// root) so the kernel and initramfs cache matches the current init.sh; it is quick when the
// cache is current.
func Prepare(ctx context.Context, cacheDir string) error {
	script := filepath.Join("e2e", "vm", "prepare.sh")
	if _, err := os.Stat(script); err != nil {
		return fmt.Errorf("vm: %s not found (run from the repository root): %w", script, err)
	}
	cmd := exec.CommandContext(ctx, script, cacheDir)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("vm: %s %s: %w", script, cacheDir, err)
	}
	return nil
}
