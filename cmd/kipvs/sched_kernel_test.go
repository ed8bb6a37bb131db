//go:build kernel

package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/kerr"
	"github.com/kipvs/kipvs/internal/testutil/netnstest"
)

// `kipvs run --ipvs-scheduler=NAME` takes every scheduler the kernel has, as kube-proxy
// does, not only kube-proxy's documented ones: for fo, ovf and twos, kipvs starts in a fresh
// namespace and the kernel lists the Service's virtual server with that scheduler. A
// scheduler whose module this kernel does not have (twos came in Linux 6.7) stops kipvs at
// start with an error naming the module, as kube-proxy's start-up probe does.
func TestKernelSchedulers(t *testing.T) {
	for _, sched := range []string{"fo", "ovf", "twos"} {
		t.Run(sched, func(t *testing.T) {
			ns := newSchedNode(t)
			src := filepath.Join(t.TempDir(), "services.yaml")
			if err := os.WriteFile(src, []byte(doctorService), 0o644); err != nil {
				t.Fatal(err)
			}
			flags := []string{"--kipvs-source-file", src, "--hostname-override", "node-a",
				"--cluster-cidr", "10.244.0.0/16", "--kipvs-service-cidr", "10.96.0.0/12",
				"--conntrack-max-per-core", "0", "--ipvs-sync-period", "1h", "--ipvs-min-sync-period", "0",
				"--metrics-bind-address", "127.0.0.1:10249", "--healthz-bind-address", "127.0.0.1:10256",
				"--kipvs-debug-endpoints", "--ipvs-scheduler", sched}
			if !kernelHasScheduler(t, ns, sched) {
				r := kipvs(t, ns, append([]string{"run"}, flags...)...)
				out := r.stdout + r.stderr
				if r.code == 0 || !strings.Contains(out, "ip_vs_"+sched) {
					t.Fatalf("kernel %s has no ip_vs_%s: kipvs run exited %d, want a failure naming the module:\n%s", uname(t), sched, r.code, out)
				}
				t.Logf("kernel %s has no module ip_vs_%s: kipvs run exits %d: %s", uname(t), sched, r.code, lastLine(out))
				return
			}
			log := startDaemon(t, ns, flags...)
			waitSynced(t, ns, log)
			got := mustRun(t, ns, "ipvsadm", "-Sn")
			want := regexp.MustCompile(`(?m)^-A -t 10\.96\.0\.10:80 -s ` + sched + `$`)
			if !want.MatchString(got) {
				t.Fatalf("ipvsadm -Sn has no virtual server with scheduler %s:\n%s", sched, got)
			}
			t.Logf("ipvsadm -Sn:\n%s", got)
		})
	}
}

// newSchedNode is a fresh namespace with an uplink holding the node address.
func newSchedNode(t *testing.T) *netnstest.NS {
	t.Helper()
	ns := netnstest.New(t)
	for _, args := range [][]string{
		{"ip", "link", "add", "eth0", "type", "dummy"},
		{"ip", "addr", "add", "192.168.50.10/24", "dev", "eth0"},
		{"ip", "link", "set", "eth0", "up"},
		{"ip", "route", "add", "default", "via", "192.168.50.1", "dev", "eth0"},
	} {
		mustRun(t, ns, args[0], args[1:]...)
	}
	return ns
}

// kernelHasScheduler asks the kernel itself: it creates and deletes a virtual server with
// scheduler sched in ns, which loads ip_vs_<sched>; ENOENT means no such module.
func kernelHasScheduler(t *testing.T, ns *netnstest.NS, sched string) bool {
	t.Helper()
	c := newClient(t, ns)
	k := key(inet.TCP, "198.51.100.9:9")
	err := c.AddService(ipvs.Service{ServiceKey: k, Scheduler: sched})
	if kerr.IsNotFound(err) {
		return false
	}
	if err != nil {
		t.Fatalf("probe scheduler %s: %v", sched, err)
	}
	if err := c.DeleteService(k); err != nil {
		t.Fatal(err)
	}
	return true
}

func uname(t *testing.T) string {
	t.Helper()
	var u syscall.Utsname
	if err := syscall.Uname(&u); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		b.WriteByte(byte(c))
	}
	return b.String()
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
