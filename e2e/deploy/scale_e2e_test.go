//go:build e2e && scale

package deploy

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/kipvs/kipvs/e2e/harness"
)

const scaleNS = "kipvs-scale"

// parallel runs fn(i) for i in [0, n) on workers goroutines and returns the first error.
func parallel(n, workers int, fn func(i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// procStat reads a process's resident set (now and peak, bytes) and CPU time (user+system).
func procStat(pid int) (rss, hwm int64, cpu time.Duration, err error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, 0, err
	}
	for _, l := range strings.Split(string(status), "\n") {
		f := strings.Fields(l)
		if len(f) == 3 && f[2] == "kB" {
			v, _ := strconv.ParseInt(f[1], 10, 64)
			switch f[0] {
			case "VmRSS:":
				rss = v << 10
			case "VmHWM:":
				hwm = v << 10
			}
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, 0, err
	}
	// Fields after the command name (which may hold spaces) start at state, field 3;
	// utime and stime are fields 14 and 15, in clock ticks (USER_HZ, 100 on Linux).
	rest := string(stat[strings.LastIndexByte(string(stat), ')')+2:])
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0, 0, 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return rss, hwm, time.Duration(ut+st) * 10 * time.Millisecond, nil
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// virtualServers counts IPVS TCP virtual servers.
func virtualServers() (int, error) {
	out, err := harness.Run("ipvsadm", "-Ln")
	if err != nil {
		return 0, err
	}
	return strings.Count(out, "\nTCP "), nil
}

// TestScaleResources measures kipvs at KIPVS_E2E_SCALE Services (each with an EndpointSlice
// of two ready endpoints), run as the DaemonSet runs it (shipped ServiceAccount, ConfigMap
// configuration) against the real apiserver, in the VM: the time to the first full sync,
// the resident memory after it and at its peak, and the CPU time of the first sync and of
// an idle period with periodic full syncs. It is the basis of the DaemonSet's resource
// requests. It is a measurement, not part of make test: it is built only with the extra
// build tag "scale" (go test -c -tags 'e2e scale' ./e2e/deploy, then e2erun ... --env
// KIPVS_E2E_SCALE=10000 -- -test.run TestScaleResources), on a cluster of its own.
func TestScaleResources(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("KIPVS_E2E_SCALE"))
	if n <= 0 {
		t.Fatal("KIPVS_E2E_SCALE must give the number of Services to measure kipvs at")
	}
	e := loadEnv(t)
	a := newAPI(t, e)
	cleanKernelAfter(t, e)
	objs := render(t, e, ".")
	a.deleteOnCleanup(t, objs...)
	a.apply(t, fieldManager, objs)
	ensureNode(t, a)

	ctx := context.Background()
	if _, err := a.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: scaleNS}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	start := time.Now()
	err := parallel(n, 32, func(i int) error {
		name := fmt.Sprintf("svc-%05d", i)
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: scaleNS},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}}},
		}
		if _, err := a.cs.CoreV1().Services(scaleNS).Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create Service %s: %w", name, err)
		}
		sl := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: name + "-1", Namespace: scaleNS, Labels: map[string]string{discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: managedBy}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](8080)}},
		}
		for j := range 2 {
			ip := fmt.Sprintf("10.%d.%d.%d", 128+(2*i+j)>>16, ((2*i+j)>>8)&0xff, (2*i+j)&0xff)
			sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
		}
		if _, err := a.cs.DiscoveryV1().EndpointSlices(scaleNS).Create(ctx, sl, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create EndpointSlice %s: %w", sl.Name, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("created %d Services and EndpointSlices in %s", n, time.Since(start).Round(time.Second))
	t.Cleanup(func() {
		err := parallel(n, 32, func(i int) error {
			name := fmt.Sprintf("svc-%05d", i)
			_ = a.cs.DiscoveryV1().EndpointSlices(scaleNS).Delete(ctx, name+"-1", metav1.DeleteOptions{})
			return a.cs.CoreV1().Services(scaleNS).Delete(ctx, name, metav1.DeleteOptions{})
		})
		if err != nil {
			t.Logf("deleting the scale objects: %v", err)
		}
	})

	ds := typed[appsv1.DaemonSet](t, find(t, objs, "DaemonSet", "kipvs"))
	cm := typed[corev1.ConfigMap](t, find(t, objs, "ConfigMap", "kipvs"))
	kc := kubeconfigFor(t, a.cfg, token(t, a, kipvsNS, kipvsSA))
	start = time.Now()
	k := startKipvs(t, e.kipvs, daemonSetArgs(t, ds, cm, nodeName, kc)...)
	pid := k.Pid()
	want := n + 1 // and default/kubernetes
	took := k.Until(t, 30*time.Minute, fmt.Sprintf("%d virtual servers", want), func() (bool, string) {
		ts, err := lastSync()
		if err != nil || ts.IsZero() {
			return false, fmt.Sprintf("no sync yet (%v)", err)
		}
		got, err := virtualServers()
		return got >= want, fmt.Sprintf("%d virtual servers (%v)", got, err)
	})
	rss, hwm, cpu, err := procStat(pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("SCALE first sync: %d services in %s; RSS %s, peak %s, CPU %s", n, took.Round(time.Second), mib(rss), mib(hwm), cpu.Round(10*time.Millisecond))

	// Idle: only the periodic full syncs (ipvs.syncPeriod) run.
	const idle = 3 * time.Minute
	m0, _ := harness.FetchMetrics()
	c0 := cpu
	deadline := time.After(idle)
	var peakRSS int64
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for done := false; !done; {
		select {
		case <-deadline:
			done = true
		case <-tick.C:
			if k.Exited() {
				t.Fatalf("kipvs exited: %v\n%s", k.Err(), k.Tail(30))
			}
			if r, _, _, err := procStat(pid); err == nil && r > peakRSS {
				peakRSS = r
			}
		}
	}
	rss, hwm, cpu, err = procStat(pid)
	if err != nil {
		t.Fatal(err)
	}
	m1, _ := harness.FetchMetrics()
	full := m1[`kipvs_sync_full_total{ip_family="IPv4"}`] - m0[`kipvs_sync_full_total{ip_family="IPv4"}`]
	sum := m1[`kubeproxy_sync_full_proxy_rules_duration_seconds_sum{ip_family="IPv4"}`] - m0[`kubeproxy_sync_full_proxy_rules_duration_seconds_sum{ip_family="IPv4"}`]
	avgFull := 0.0
	if full > 0 {
		avgFull = sum / full
	}
	t.Logf("SCALE idle %s: %.0f full syncs (%.2f s each on average); CPU %s = %.3f cores; RSS %s (max sampled %s), peak %s; Go heap in use %s",
		idle, full, avgFull, (cpu - c0).Round(10*time.Millisecond), (cpu-c0).Seconds()/idle.Seconds(), mib(rss), mib(peakRSS), mib(hwm),
		mib(int64(m1["go_memstats_heap_inuse_bytes"])))
	if full < 2 {
		t.Errorf("only %.0f full syncs in %s with ipvs.syncPeriod 30s", full, idle)
	}
	if strings.Contains(logOf(k), "forbidden") {
		t.Errorf("the apiserver refused kipvs something:\n%s", grepLines(logOf(k), "forbidden"))
	}
}
