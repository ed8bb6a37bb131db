//go:build e2e

package tests

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/kipvs/kipvs/e2e/harness"
	"github.com/kipvs/kipvs/internal/testutil/poll"
)

// Issue 4, a per-Service scheduler whose kernel module cannot be loaded: the kernel's
// module loader (kernel.modprobe, run from PID 1's root) is replaced for the test by a
// wrapper that refuses ip_vs_lblcr and passes everything else on. kipvs keeps the global
// scheduler for the Service, emits a Warning Event SchedulerUnavailable, and serves it.
func TestSchedulerUnavailable(t *testing.T) {
	const module = "ip_vs_lblcr"
	if _, err := os.Stat("/sys/module/" + module); err == nil {
		t.Fatalf("%s is already loaded: this VM cannot show a scheduler that fails to load", module)
	}
	// PID 1's root is where the kernel runs its module loader; /proc/1/root reaches it from
	// the tests' chroot.
	dir := "/kipvs-e2e-modprobe"
	if err := os.MkdirAll(filepath.Join("/proc/1/root", dir), 0o755); err != nil {
		t.Fatal(err)
	}
	wrapper, logFile := dir+"/deny-lblcr", dir+"/calls"
	script := "#!/bin/sh\necho \"$*\" >>" + logFile + "\ncase \" $* \" in *\" " + module + " \"*) exit 1;; esac\nexec /sbin/modprobe \"$@\"\n"
	if err := os.WriteFile(filepath.Join("/proc/1/root", wrapper), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile("/proc/sys/kernel/modprobe")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("/proc/sys/kernel/modprobe", []byte(wrapper), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.WriteFile("/proc/sys/kernel/modprobe", old, 0o644); err != nil {
			t.Errorf("restore kernel.modprobe: %v", err)
		}
		_ = os.RemoveAll(filepath.Join("/proc/1/root", dir))
	})

	s := newScenario(t)
	backends := s.pods("su", 10, 2)
	client := s.topo.AddPod(t, "suc", netip.MustParseAddr("10.244.0.20"), harness.PodOptions{NoEcho: true})
	vip := netip.MustParseAddr("10.96.17.13")
	svc := s.api.CreateService(t, harness.ServiceSpec{Name: "i4-sched-unloadable", ClusterIP: vip, Mutate: func(svc *v1.Service) {
		svc.Annotations = map[string]string{"kipvs.io/scheduler": "lblcr"}
	}})
	s.api.SetEndpoints(t, svc, backends...)
	k := s.startKipvs()
	k.WaitSynced(t, programLimit, "programmed with the global scheduler", harness.IPVSHas(map[string]map[string]int{
		vs(harness.TCP, vip, 80): harness.Weights(1, backends...), vs(harness.UDP, vip, 80): harness.Weights(1, backends...),
	}))
	if save := harness.DumpIPVS(t); !strings.Contains(save, "-A -t "+ap(vip, 80).String()+" -s rr\n") {
		t.Errorf("ipvsadm -Sn: want %s with the global scheduler rr:\n%s", ap(vip, 80), save)
	}
	poll.Until(t, programLimit, "Warning Event SchedulerUnavailable", func() (bool, string) {
		evs := s.api.Events(t, svc.Name, v1.EventTypeWarning)
		for _, e := range evs {
			if e.Reason == "SchedulerUnavailable" && strings.Contains(e.Note, "lblcr") {
				t.Logf("%s: %s %s", svc.Name, e.Reason, e.Note)
				return true, ""
			}
		}
		return false, "events: " + harness.EventSummary(evs)
	})
	c := harness.In(&client.NS)
	for _, p := range []harness.Proto{harness.TCP, harness.UDP} {
		expectSpread(t, "pod -> "+string(p)+" ClusterIP with the fallback scheduler", c, p, ap(vip, 80), 6, client.IP, backends...)
	}
	calls, err := os.ReadFile(filepath.Join("/proc/1/root", logFile))
	if err != nil || !strings.Contains(string(calls), module) {
		t.Errorf("the module loader was never asked for %s (%v): the test proved nothing; calls:\n%s", module, err, calls)
	}
	if _, err := os.Stat("/sys/module/" + module); err == nil {
		t.Errorf("%s got loaded after all", module)
	}
}
