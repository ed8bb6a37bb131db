//go:build kernel

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kipvs/kipvs/internal/debugapi"
	"github.com/kipvs/kipvs/internal/doctor"
	"github.com/kipvs/kipvs/internal/netfilter"
	"github.com/kipvs/kipvs/internal/netnsutil"
	"github.com/kipvs/kipvs/internal/sysctl"
	"github.com/kipvs/kipvs/internal/testutil/netnstest"
	"github.com/kipvs/kipvs/internal/testutil/poll"
)

// The doctor kernel test runs `kipvs run` on a standalone source file in a fresh namespace
// laid out like a node (an uplink with the node address, a bridge CNI with one pod), checks
// that `kipvs doctor` finds it healthy, then breaks it one way at a time and checks that
// doctor fails exactly that check, with its fix, and nothing else.

const doctorService = `apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  clusterIP: 10.96.0.10
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, namespace: default, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, port: 8080, protocol: TCP}]
endpoints:
- addresses: [10.244.0.11]
  nodeName: node-a
`

// lockedBuffer collects a child's output.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startDaemon starts `kipvs run args...` inside ns and stops it when the test ends.
func startDaemon(t *testing.T, ns *netnstest.NS, args ...string) *lockedBuffer {
	t.Helper()
	bin, env := os.Getenv("KIPVS_BIN"), []string(nil)
	if bin == "" {
		bin, env = os.Args[0], []string{runMainEnv + "=1"}
	}
	cmd := exec.Command(bin, append([]string{"run"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	log := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := netnsutil.Do(ns.Handle, cmd.Start); err != nil {
		t.Fatalf("start kipvs run: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("kipvs run exited with %v", err)
			}
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("kipvs run did not stop within 60 s of SIGTERM")
		}
		if t.Failed() {
			t.Logf("kipvs run log:\n%s", log.String())
		}
	})
	return log
}

// nsHTTPClient dials from inside ns (the socket is created on a thread in ns).
func nsHTTPClient(ns *netnstest.NS) *http.Client {
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := netnsutil.Do(ns.Handle, func() error {
			var err error
			c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}}
}

// waitSynced polls the daemon's state endpoint until its IPv4 family is synced with the
// Service's virtual server.
func waitSynced(t *testing.T, ns *netnstest.NS, log *lockedBuffer) {
	t.Helper()
	client := nsHTTPClient(ns)
	_, err := poll.Wait(2*time.Minute, "kipvs run to sync", func() (bool, string) {
		resp, err := client.Get("http://127.0.0.1:10249" + debugapi.StatePath)
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		var st debugapi.State
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			return false, err.Error()
		}
		return allSynced(st.Families), fmt.Sprintf("families %+v", st.Families)
	})
	if err != nil {
		t.Fatalf("%v; log:\n%s", err, log.String())
	}
}

// allSynced reports whether every family kipvs runs has synced and IPv4 holds the one
// virtual server of doctorService. The IPv6 family runs too wherever ip6tables works, as
// upstream's does, with no Service of its own.
func allSynced(fams []debugapi.FamilyState) bool {
	v4 := false
	for _, f := range fams {
		if !f.Synced {
			return false
		}
		if f.Family == "IPv4" {
			v4 = len(f.VirtualServers) == 1
		}
	}
	return v4
}

// runDoctor runs `kipvs doctor -o json` with flags in ns and returns its report and exit code.
func runDoctor(t *testing.T, ns *netnstest.NS, flags []string) (*doctor.Report, int) {
	t.Helper()
	r := kipvs(t, ns, append([]string{"doctor", "-o", "json"}, flags...)...)
	var rep doctor.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("kipvs doctor -o json: exit %d, stderr %s, output not JSON (%v):\n%s", r.code, r.stderr, err, r.stdout)
	}
	if len(rep.Results) < 20 {
		t.Fatalf("kipvs doctor: only %d results:\n%s", len(rep.Results), r.stdout)
	}
	return &rep, r.code
}

func reportText(rep *doctor.Report) string {
	var b bytes.Buffer
	_ = rep.WriteTable(&b)
	return b.String()
}

// wantHealthy asserts every check is OK and doctor exits 0, and returns the report.
func wantHealthy(t *testing.T, ns *netnstest.NS, flags []string, when string) *doctor.Report {
	t.Helper()
	rep, code := runDoctor(t, ns, flags)
	if code != 0 || rep.Count(doctor.OK) != len(rep.Results) {
		t.Errorf("%s: exit %d, want every check OK:\n%s", when, code, reportText(rep))
	}
	return rep
}

// wantFail asserts doctor exits 1 with exactly one FAIL, check, whose finding and fix hold
// the given substrings; allowed lists the checks that may WARN as a consequence.
func wantFail(t *testing.T, ns *netnstest.NS, flags []string, check string, finding, fix []string, allowed ...string) {
	t.Helper()
	rep, code := runDoctor(t, ns, flags)
	ok := code == 1
	var failed []string
	for _, r := range rep.Results {
		switch {
		case r.Status == doctor.Fail:
			failed = append(failed, r.Check)
		case r.Status == doctor.Warn && !slices.Contains(allowed, r.Check):
			ok = false
		}
	}
	if !slices.Equal(failed, []string{check}) {
		ok = false
	} else {
		r := rep.Find(check)[0]
		for _, s := range finding {
			ok = ok && strings.Contains(r.Finding, s)
		}
		for _, s := range fix {
			ok = ok && strings.Contains(r.Fix, s)
		}
	}
	if !ok {
		t.Errorf("want exit 1 and only %q failing (finding with %q, fix with %q; may also WARN: %q); got exit %d:\n%s",
			check, finding, fix, allowed, code, reportText(rep))
	}
}

func TestKernelDoctor(t *testing.T) {
	ns := netnstest.New(t)
	pod := netnstest.New(t)
	sh := func(args ...string) string { t.Helper(); return mustRun(t, ns, args[0], args[1:]...) }

	// The node: an uplink with the node address, a bridge CNI with one pod (hairpin on).
	sh("ip", "link", "add", "eth0", "type", "dummy")
	sh("ip", "addr", "add", "192.168.50.10/24", "dev", "eth0")
	sh("ip", "link", "set", "eth0", "up")
	sh("ip", "route", "add", "default", "via", "192.168.50.1", "dev", "eth0")
	sh("ip", "link", "add", "cbr0", "type", "bridge")
	sh("ip", "addr", "add", "10.244.0.1/24", "dev", "cbr0")
	sh("ip", "link", "set", "cbr0", "up")
	sh("ip", "link", "add", "veth1", "type", "veth", "peer", "name", "eth0", "netns", pod.Name)
	sh("ip", "link", "set", "veth1", "master", "cbr0", "up")
	sh("ip", "link", "set", "dev", "veth1", "type", "bridge_slave", "hairpin", "on")
	mustRun(t, pod, "ip", "addr", "add", "10.244.0.11/24", "dev", "eth0")
	mustRun(t, pod, "ip", "link", "set", "eth0", "up")

	src := filepath.Join(t.TempDir(), "services.yaml")
	if err := os.WriteFile(src, []byte(doctorService), 0o644); err != nil {
		t.Fatal(err)
	}
	flags := []string{"--kipvs-source-file", src, "--hostname-override", "node-a",
		"--cluster-cidr", "10.244.0.0/16", "--kipvs-service-cidr", "10.96.0.0/12",
		// nf_conntrack_max is read-only outside the initial namespace: leave it alone.
		"--conntrack-max-per-core", "0",
		// Only the first full sync: drift stays for doctor to see.
		"--ipvs-sync-period", "1h", "--ipvs-min-sync-period", "0",
		"--metrics-bind-address", "127.0.0.1:10249", "--healthz-bind-address", "127.0.0.1:10256",
		// The drift checks read /debug/kipvs/state, which is off by default.
		"--kipvs-debug-endpoints"}
	log := startDaemon(t, ns, flags...)
	waitSynced(t, ns, log)

	t.Logf("healthy node:\n%s", reportText(wantHealthy(t, ns, flags, "healthy node")))
	if r := kipvs(t, ns, append([]string{"doctor"}, flags...)...); r.code != 0 || !strings.HasPrefix(r.stdout, "CHECK") ||
		!strings.HasSuffix(r.stdout, " OK, 0 WARN, 0 FAIL\n") {
		t.Errorf("kipvs doctor (table): exit %d, stderr %s:\n%s", r.code, r.stderr, r.stdout)
	}

	t.Run("sysctl", func(t *testing.T) {
		s := sysctl.New(sysctl.DefaultRoot, ns.Handle)
		if _, _, err := s.Set("net.ipv4.vs.conntrack", "0"); err != nil {
			t.Fatal(err)
		}
		wantFail(t, ns, flags, "sysctl net.ipv4.vs.conntrack", []string{"net.ipv4.vs.conntrack = 0, kipvs needs 1"}, []string{"sysctl -w net.ipv4.vs.conntrack=1"})
		if _, _, err := s.Set("net.ipv4.vs.conntrack", "1"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("FORWARD DROP without KUBE-FORWARD", func(t *testing.T) {
		b, err := netfilter.Detect(context.Background(), netfilter.NewRunner(ns.Handle), "")
		if err != nil {
			t.Fatal(err)
		}
		ipt := "iptables-" + string(b.Mode)
		sh(ipt, "-P", "FORWARD", "DROP")
		// With kipvs's jump, a DROP policy is fine.
		wantHealthy(t, ns, flags, "FORWARD policy DROP with kipvs's jump")
		jump := []string{"-m", "comment", "--comment", "kubernetes forwarding rules", "-j", "KUBE-FORWARD"}
		pos := forwardPosition(t, sh(ipt+"-save", "-t", "filter"))
		sh(append([]string{ipt, "-D", "FORWARD"}, jump...)...)
		wantFail(t, ns, flags, "FORWARD policy", []string{"policy is DROP", "no jump to KUBE-FORWARD"},
			[]string{`iptables -I FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD`}, "drift: iptables")
		sh(append([]string{ipt, "-I", "FORWARD", fmt.Sprint(pos)}, jump...)...)
		sh(ipt, "-P", "FORWARD", "ACCEPT")
	})

	t.Run("FORWARD DROP on the other iptables backend", func(t *testing.T) {
		// dockerd on iptables-legacy beside kipvs on iptables-nft (or the reverse): a
		// forwarded packet traverses both backends' FORWARD chains, so the DROP policy
		// there drops Service traffic although kipvs's own backend is fine.
		b, err := netfilter.Detect(context.Background(), netfilter.NewRunner(ns.Handle), "")
		if err != nil {
			t.Fatal(err)
		}
		other := netfilter.ModeLegacy
		if b.Mode == netfilter.ModeLegacy {
			other = netfilter.ModeNFT
		}
		ipt := "iptables-" + string(other)
		sh(ipt, "-t", "filter", "-P", "FORWARD", "DROP")
		wantFail(t, ns, flags, "FORWARD policy", []string{ipt + " filter FORWARD policy is DROP", "kipvs programs the other backend"},
			[]string{ipt + " -P FORWARD ACCEPT"})
		sh(ipt, "-t", "filter", "-P", "FORWARD", "ACCEPT")
		rep := wantHealthy(t, ns, flags, "the other backend's FORWARD policy back to ACCEPT")
		if r := rep.Find("FORWARD policy"); len(r) != 1 || !strings.Contains(r[0].Finding, ipt+" filter FORWARD policy ACCEPT") {
			t.Errorf("FORWARD policy check does not report the other backend: %+v", r)
		}
	})

	t.Run("clusterCIDR is the Service CIDR", func(t *testing.T) {
		wrong := append(slices.Clone(flags), "--cluster-cidr", "10.96.0.0/12")
		wantFail(t, ns, wrong, "cluster CIDR", []string{"clusterCIDR 10.96.0.0/12 is the Service CIDR 10.96.0.0/12 (from --kipvs-service-cidr)"},
			// The local-traffic check says why the overlapping CIDR is not used.
			[]string{"--cluster-cidr", "pod CIDR"}, "local traffic detector")
	})

	t.Run("node address bound on kube-ipvs0", func(t *testing.T) {
		sh("ip", "addr", "add", "192.168.50.10/32", "dev", "kube-ipvs0")
		wantFail(t, ns, flags, "kube-ipvs0 addresses", []string{"192.168.50.10 is on kube-ipvs0 and is a node address on eth0"},
			[]string{"ip addr del 192.168.50.10/32 dev kube-ipvs0"}, "drift: kube-ipvs0")
		sh("ip", "addr", "del", "192.168.50.10/32", "dev", "kube-ipvs0")
		if out := sh("ip", "route", "get", "192.168.50.10"); !strings.HasPrefix(out, "local 192.168.50.10 ") {
			t.Logf("after the stray VIP is removed: ip route get 192.168.50.10: %s", out)
		}
	})

	t.Run("route sends the Service CIDR off the node", func(t *testing.T) {
		sh("ip", "route", "add", "10.96.0.0/12", "via", "192.168.50.1", "dev", "eth0")
		wantFail(t, ns, flags, "service routes", []string{"route unicast 10.96.0.0/12 via 192.168.50.1 dev eth0 table main sends the Service CIDR 10.96.0.0/12"},
			[]string{"ip route del 10.96.0.0/12 via 192.168.50.1 dev eth0 table main"})
		sh("ip", "route", "del", "10.96.0.0/12", "via", "192.168.50.1", "dev", "eth0")
	})

	t.Run("policy routing ahead of the local table", func(t *testing.T) {
		sh("ip", "rule", "add", "pref", "100", "lookup", "local")
		sh("ip", "rule", "del", "pref", "0", "lookup", "local")
		sh("ip", "rule", "add", "pref", "50", "to", "10.96.0.0/12", "lookup", "100")
		sh("ip", "route", "add", "10.96.0.0/12", "via", "192.168.50.1", "dev", "eth0", "table", "100")
		wantFail(t, ns, flags, "service routes", []string{"ip route get 10.96.0.10 gives unicast via 192.168.50.1 dev eth0 table 100, not local",
			"route unicast 10.96.0.0/12 via 192.168.50.1 dev eth0 table 100"}, []string{"ip rule show"})
		sh("ip", "route", "del", "10.96.0.0/12", "table", "100")
		sh("ip", "rule", "del", "pref", "50")
		sh("ip", "rule", "add", "pref", "0", "lookup", "local")
		sh("ip", "rule", "del", "pref", "100", "lookup", "local")
	})

	t.Run("hairpin off", func(t *testing.T) {
		sh("ip", "link", "set", "dev", "veth1", "type", "bridge_slave", "hairpin", "off")
		wantWarn(t, ns, flags, "bridge hairpin", []string{"veth1 (bridge cbr0)"}, nil)
		sh("ip", "link", "set", "dev", "veth1", "type", "bridge_slave", "hairpin", "on")
	})

	// Drift between the daemon's desired state (its /debug/kipvs/state) and the kernel. The
	// daemon's next full sync is an hour away, so what is broken here stays broken.
	t.Run("drift: ipset member removed", func(t *testing.T) {
		sh("ipset", "del", "KUBE-CLUSTER-IP", "10.96.0.10,tcp:80")
		wantWarn(t, ns, flags, "drift: ipsets", []string{"KUBE-CLUSTER-IP lacks 10.96.0.10,tcp:80"}, []string{"full sync"})
		sh("ipset", "add", "KUBE-CLUSTER-IP", "10.96.0.10,tcp:80")
	})

	t.Run("drift: virtual server deleted", func(t *testing.T) {
		sh("ipvsadm", "-D", "-t", "10.96.0.10:80")
		wantWarn(t, ns, flags, "drift: virtual servers", []string{"IPVS lacks TCP 10.96.0.10:80 (ClusterIP default/web)"}, []string{"full sync"})
		sh("ipvsadm", "-A", "-t", "10.96.0.10:80", "-s", "rr")
		sh("ipvsadm", "-a", "-t", "10.96.0.10:80", "-r", "10.244.0.11:8080", "-m", "-w", "1")
	})

	t.Run("drift: a kipvs rule deleted", func(t *testing.T) {
		// The mark rule every masquerade path goes through: without it nothing is SNATed.
		b, err := netfilter.Detect(context.Background(), netfilter.NewRunner(ns.Handle), "")
		if err != nil {
			t.Fatal(err)
		}
		ipt := "iptables-" + string(b.Mode)
		var rule string
		for _, l := range strings.Split(sh(ipt+"-save", "-t", "nat"), "\n") {
			if strings.HasPrefix(l, "-A KUBE-MARK-MASQ ") {
				rule = l
			}
		}
		if rule == "" || strings.Contains(rule, `"`) {
			t.Fatalf("no plain KUBE-MARK-MASQ rule to delete: %q", rule)
		}
		sh(ipt, "-t", "nat", "-D", "KUBE-MARK-MASQ", "1")
		wantWarn(t, ns, flags, "drift: iptables", []string{"missing", "nat: " + rule}, []string{"full sync"})
		sh(append([]string{ipt, "-t", "nat"}, strings.Fields(rule)...)...)
	})

	t.Run("drift: stray VIP on kube-ipvs0", func(t *testing.T) {
		sh("ip", "addr", "add", "10.96.0.99/32", "dev", "kube-ipvs0")
		wantWarn(t, ns, flags, "drift: kube-ipvs0", []string{"kube-ipvs0 has unwanted 10.96.0.99"}, []string{"full sync"})
		sh("ip", "addr", "del", "10.96.0.99/32", "dev", "kube-ipvs0")
	})

	t.Run("foreign virtual server on a VIP", func(t *testing.T) {
		sh("ipvsadm", "-A", "-t", "10.96.0.10:81", "-s", "rr")
		wantWarn(t, ns, flags, "foreign virtual servers", []string{"TCP 10.96.0.10:81 shares 10.96.0.10 with kipvs's ClusterIP of default/web"},
			[]string{"ipvsadm -D -t 10.96.0.10:81"})
		sh("ipvsadm", "-D", "-t", "10.96.0.10:81")
	})

	wantHealthy(t, ns, flags, "after every break was undone")
}

// wantWarn asserts doctor exits 0 with exactly one WARN, check, whose finding and fix hold
// the given substrings, and every other check OK.
func wantWarn(t *testing.T, ns *netnstest.NS, flags []string, check string, finding, fix []string) {
	t.Helper()
	rep, code := runDoctor(t, ns, flags)
	got := rep.Find(check)
	ok := code == 0 && rep.Count(doctor.Warn) == 1 && rep.Count(doctor.Fail) == 0 && len(got) == 1 && got[0].Status == doctor.Warn
	for _, s := range finding {
		ok = ok && strings.Contains(got[0].Finding, s)
	}
	for _, s := range fix {
		ok = ok && strings.Contains(got[0].Fix, s)
	}
	if !ok {
		t.Errorf("want exit 0 and only %q WARN (finding with %q, fix with %q); got exit %d:\n%s", check, finding, fix, code, reportText(rep))
	}
}

// forwardPosition returns the 1-based position of kipvs's KUBE-FORWARD jump in FORWARD.
func forwardPosition(t *testing.T, save string) int {
	t.Helper()
	n := 0
	for _, l := range strings.Split(save, "\n") {
		if !strings.HasPrefix(l, "-A FORWARD ") {
			continue
		}
		n++
		if strings.HasSuffix(l, "-j KUBE-FORWARD") {
			return n
		}
	}
	t.Fatalf("no KUBE-FORWARD jump in:\n%s", save)
	return 0
}
