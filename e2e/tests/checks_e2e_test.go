//go:build e2e

package tests

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kipvs/kipvs/e2e/harness"
	"github.com/kipvs/kipvs/internal/testutil/poll"
)

// startChecked starts `kipvs run` with the scenarios' flags plus extra and waits, up to
// startLimit, until it has synced and cond (may be nil) holds, failing at once when a
// sync fails (see waitProgrammed). Unlike startKipvs it does not wait for a first
// successful sync first, so a sync that keeps failing is reported as such, not as a
// timeout.
func (s *scenario) startChecked(what string, cond func() (bool, string), extra ...string) *harness.Kipvs {
	s.t.Helper()
	k := harness.StartKipvs(s.t, s.env, s.runArgs(extra...)...)
	d := waitProgrammed(s.t, k, startLimit, what, cond)
	s.t.Logf("%s %.1fs after kipvs started", what, d.Seconds())
	s.expectBackendState()
	return k
}

// waitProgrammed is k.WaitSynced that fails the test as soon as kipvs has counted a failed
// sync (kipvs_sync_errors_total > 0), quoting kipvs's error lines: the scenarios using it
// expect every sync to succeed.
func waitProgrammed(t *testing.T, k *harness.Kipvs, limit time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	return k.WaitSynced(t, limit, what, func() (bool, string) {
		if m, err := harness.FetchMetrics(); err == nil {
			if n := m.Get("kipvs_sync_errors_total"); n > 0 {
				// The failed sync is counted before kipvs logs why.
				_, _ = poll.Wait(10*time.Second, "kipvs's ERROR line", func() (bool, string) {
					return errorLines(k.Log(), 1) != "", ""
				})
				t.Fatalf("waiting for %s: kipvs_sync_errors_total is %v, want 0; kipvs's error lines:\n%s", what, n, errorLines(k.Log(), 6))
			}
		}
		if cond != nil {
			return cond()
		}
		return true, ""
	})
}

// expectHealthy checks that kipvs's /healthz answers 200 and that no sync has failed
// (kipvs_sync_errors_total and kubeproxy_sync_proxy_rules_iptables_restore_failures_total
// are 0).
func expectHealthy(t *testing.T, k *harness.Kipvs) {
	t.Helper()
	code, body, err := harness.Healthz()
	switch {
	case err != nil:
		t.Errorf("%v", err)
	case code != 200:
		t.Errorf("kipvs /healthz: HTTP %d, want 200: %s", code, strings.TrimSpace(body))
	}
	m := k.Metrics(t)
	for _, name := range []string{"kipvs_sync_errors_total", "kubeproxy_sync_proxy_rules_iptables_restore_failures_total"} {
		if n := m.Get(name); n != 0 {
			t.Errorf("%s is %v, want 0; kipvs's error lines:\n%s", name, n, errorLines(k.Log(), 6))
		}
	}
}

// errorLines returns the last n lines of log that mention an error.
func errorLines(log string, n int) string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(strings.ToLower(l), "error") {
			out = append(out, l)
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return strings.Join(out, "\n")
}

// driftSamples lists the non-zero samples of kipvs_kernel_drift_repaired_total.
func driftSamples(m harness.Metrics) string {
	var out []string
	for k, v := range m {
		if strings.HasPrefix(k, "kipvs_kernel_drift_repaired_total") && v != 0 {
			out = append(out, fmt.Sprintf("%s %v", k, v))
		}
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// expectNoDrift waits for a full sync that starts after now and checks that no full sync
// so far found anything to repair (kipvs_kernel_drift_repaired_total is 0): what kipvs
// wrote reads back as written. The wait is fullSyncLimit, from kipvs's own full-sync
// durations (with the nftables backend a full sync reads each set with an nft run of its
// own, seconds apiece under TCG), plus programLimit.
func expectNoDrift(t *testing.T, k *harness.Kipvs) {
	t.Helper()
	full := k.Metrics(t).Get("kipvs_sync_full_total", `ip_family="IPv4"`)
	limit, _ := fullSyncLimit(t, k)
	waitProgrammed(t, k, limit+programLimit, "a full sync", func() (bool, string) {
		m, err := harness.FetchMetrics()
		if err != nil {
			return false, err.Error()
		}
		return m.Get("kipvs_sync_full_total", `ip_family="IPv4"`) > full+1, "no full sync started after the last check yet"
	})
	if m := k.Metrics(t); m.Get("kipvs_kernel_drift_repaired_total") != 0 {
		t.Errorf("a full sync repaired drift nobody caused: %s", driftSamples(m))
	}
}
