package harness

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kipvs/kipvs/e2e/vm"
	"github.com/kipvs/kipvs/internal/testutil/poll"
)

// SyncPeriod is --ipvs-sync-period in the scenarios: the longest a drift stays unrepaired.
const SyncPeriod = 5 * time.Second

// Kipvs is a `kipvs run` subprocess in the node's namespace, or (StartKubeProxy) the real
// kube-proxy, the oracle of the differential tests: both serve the same metrics on
// MetricsAddr and HealthAddr.
type Kipvs struct {
	Name string // "kipvs" or "kube-proxy", for messages
	Args []string
	cmd  *exec.Cmd
	log  *vm.SyncBuffer
	done chan struct{} // closed when the process has exited and been waited for
	err  error         // exit status, valid after done
}

// RunArgs are the scenarios' `kipvs run` flags; extra flags are appended (a repeated flag
// overrides: the last one wins).
func RunArgs(env Env, extra ...string) []string {
	return append([]string{"run",
		"--kubeconfig", env.Kubeconfig,
		"--hostname-override", NodeName,
		"--cluster-cidr", ClusterCIDR.String(),
		"--ipvs-min-sync-period", "0",
		"--ipvs-sync-period", SyncPeriod.String(),
		"--metrics-bind-address", MetricsAddr,
		"--healthz-bind-address", HealthAddr,
		"--bind-address-hard-fail",
	}, extra...)
}

// StartKipvs starts `kipvs args...` and registers its stop with t.Cleanup; when the test
// has failed by then (or KIPVS_E2E_SHOW_LOGS=1), kipvs's log goes into the test log.
func StartKipvs(t testing.TB, env Env, args ...string) *Kipvs {
	t.Helper()
	return Start(t, "kipvs", env.KipvsBin, args...)
}

// StartKubeProxy starts the kube-proxy binary (Env.RequireKubeProxy) with args, as
// StartKipvs starts kipvs.
func StartKubeProxy(t testing.TB, env Env, args ...string) *Kipvs {
	t.Helper()
	return Start(t, "kube-proxy", env.RequireKubeProxy(t), args...)
}

// Start starts bin with args as a supervised process called name in messages ("kipvs",
// "kube-proxy"; a process of another name must exit 0 on SIGTERM, as kipvs does) and
// registers its stop with t.Cleanup, as StartKipvs does. It is how tests that do not use
// the scenarios' Env (e2e/deploy) run kipvs.
func Start(t testing.TB, name, bin string, args ...string) *Kipvs {
	t.Helper()
	k := &Kipvs{Name: name, Args: args, log: &vm.SyncBuffer{}, done: make(chan struct{})}
	k.cmd = exec.Command(bin, args...)
	k.cmd.Stdout, k.cmd.Stderr = k.log, k.log
	k.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := k.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { k.err = k.cmd.Wait(); close(k.done) }()
	t.Cleanup(func() {
		k.Stop(t)
		if t.Failed() || os.Getenv("KIPVS_E2E_SHOW_LOGS") == "1" {
			t.Logf("%s %s log:\n%s", name, strings.Join(args, " "), tailLines(k.log.String(), 400))
		}
	})
	return k
}

// Log returns what kipvs has written so far.
func (k *Kipvs) Log() string { return k.log.String() }

// Tail is the last n lines of the log.
func (k *Kipvs) Tail(n int) string { return tailLines(k.log.String(), n) }

// Err is the process's exit status once it has exited, nil before.
func (k *Kipvs) Err() error {
	if !k.Exited() {
		return nil
	}
	return k.err
}

// Pid is the process's id.
func (k *Kipvs) Pid() int { return k.cmd.Process.Pid }

// Exited reports whether the process has ended.
func (k *Kipvs) Exited() bool {
	select {
	case <-k.done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM and waits for the exit (SIGKILL after 30 s); an exit status other
// than 0 fails the test. Stopping twice is fine.
func (k *Kipvs) Stop(t testing.TB) {
	t.Helper()
	if k.Exited() {
		return
	}
	_ = k.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-k.done:
	case <-time.After(30 * time.Second):
		_ = k.cmd.Process.Kill()
		<-k.done
		t.Errorf("%s did not stop within 30 s of SIGTERM", k.Name)
		return
	}
	if k.err != nil && !(k.Name == "kube-proxy" && killedBy(k.err, syscall.SIGTERM)) {
		// kube-proxy has no SIGTERM handler: the signal ends it, which is its normal stop.
		t.Errorf("%s exited with %v", k.Name, k.err)
	}
}

// killedBy reports whether err is the exit of a process ended by signal sig.
func killedBy(err error, sig syscall.Signal) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

// Wait waits for the process to exit on its own and returns its output and exit error.
func (k *Kipvs) Wait(t testing.TB, limit time.Duration) (string, error) {
	t.Helper()
	select {
	case <-k.done:
		return k.log.String(), k.err
	case <-time.After(limit):
		t.Fatalf("%s %s still running after %s; log:\n%s", k.Name, strings.Join(k.Args, " "), limit, tailLines(k.log.String(), 100))
		return "", nil
	}
}

// WaitSynced waits until kipvs has finished a sync that started after everything it was
// asked to do (its last sync ended after the last queued request and nothing is pending)
// and cond holds. cond (may be nil) checks the kernel for the expected result; both are
// needed because a change still on its way from the apiserver is in neither metric.
func (k *Kipvs) WaitSynced(t testing.TB, limit time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	return k.Until(t, limit, what, func() (bool, string) {
		if cond != nil {
			if ok, detail := cond(); !ok {
				return false, detail
			}
		}
		m, err := FetchMetrics()
		if err != nil {
			return false, err.Error()
		}
		return m.Synced()
	})
}

// Until is poll.Until while the process runs: its exit fails the test at once, and a
// timeout shows the end of its log after cond's detail.
func (k *Kipvs) Until(t testing.TB, limit time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	return poll.Until(t, limit, what, func() (bool, string) {
		if k.Exited() {
			t.Fatalf("%s exited (%v) while waiting for %s; log:\n%s", k.Name, k.err, what, k.Tail(200))
		}
		done, detail := cond()
		return done, detail + "\n--- " + k.Name + " log (tail) ---\n" + k.Tail(15)
	})
}

// Metrics fetches kipvs's /metrics, failing the test when it cannot.
func (k *Kipvs) Metrics(t testing.TB) Metrics {
	t.Helper()
	m, err := FetchMetrics()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Healthz asks kipvs's /healthz (HealthAddr) and returns the HTTP status code and body.
func Healthz() (int, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+HealthAddr+"/healthz", nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("kipvs /healthz: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, "", fmt.Errorf("kipvs /healthz: read body: %w", err)
	}
	return resp.StatusCode, string(body), nil
}

// Metrics is one scrape of /metrics: sample lines "name{labels}" -> value.
type Metrics map[string]float64

// FetchMetrics scrapes MetricsAddr. At 10,000 Services the body is some 10 MB, which
// takes seconds to write under TCG: the limit is 30 s, and a body cut short is an error,
// never a parsed part.
func FetchMetrics() (Metrics, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+MetricsAddr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape kipvs metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape kipvs metrics: HTTP %d", resp.StatusCode)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("scrape kipvs metrics: read the body: %w", err)
	}
	return parseMetrics(bytes.NewReader(body))
}

// ScrapeRaw scrapes MetricsAddr as Prometheus does (text format) and discards the body,
// returning its size.
func ScrapeRaw() (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+MetricsAddr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("scrape metrics: %w", err)
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("scrape metrics: HTTP %d", resp.StatusCode)
	}
	return n, err
}

func parseMetrics(r io.Reader) (Metrics, error) {
	m := Metrics{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			return nil, fmt.Errorf("metrics: malformed line %q", line)
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics: malformed value in %q: %w", line, err)
		}
		m[line[:i]] = v
	}
	return m, sc.Err()
}

// Get sums the samples of metric name whose labels include every label given as
// `key="value"` (exact text as exposed).
func (m Metrics) Get(name string, labels ...string) float64 {
	var sum float64
	for k, v := range m {
		base, rest, _ := strings.Cut(k, "{")
		if base != name {
			continue
		}
		ok := true
		for _, l := range labels {
			if !strings.Contains(rest, l) {
				ok = false
				break
			}
		}
		if ok {
			sum += v
		}
	}
	return sum
}

// Synced reports whether the IPv4 sync loop is idle: a sync has completed, the last one
// ended after the last queued request, and no change is pending.
func (m Metrics) Synced() (bool, string) {
	fam := `ip_family="IPv4"`
	last := m.Get("kubeproxy_sync_proxy_rules_last_timestamp_seconds", fam)
	queued := m.Get("kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds", fam)
	svc := m.Get("kubeproxy_sync_proxy_rules_service_changes_pending")
	eps := m.Get("kubeproxy_sync_proxy_rules_endpoint_changes_pending")
	switch {
	case last == 0:
		return false, "no sync completed yet"
	case last < queued:
		return false, fmt.Sprintf("a sync is queued (last sync %.3f < last queued %.3f)", last, queued)
	case svc+eps > 0:
		return false, fmt.Sprintf("%v service and %v endpoint changes pending", svc, eps)
	}
	return true, ""
}

// RunCleanup runs `kipvs cleanup` and returns its output.
func RunCleanup(env Env) (string, error) {
	return Run(env.KipvsBin, "cleanup")
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("... (%d earlier lines)", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// WithoutFlag returns args without flag (given as "--name") and its value, whether written
// "--name value" or "--name=value".
func WithoutFlag(args []string, flag string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		switch {
		case args[i] == flag:
			i++ // and its value
		case strings.HasPrefix(args[i], flag+"="):
		default:
			out = append(out, args[i])
		}
	}
	return out
}
