package server

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/kipvs/kipvs/internal/metrics"
)

// ToBeDeletedTaint marks a node the cluster autoscaler is about to remove.
const ToBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"

// Health tracks two things. Whether the proxier keeps up (/healthz, kube-proxy's
// semantics): a family is unhealthy when an update was queued more than Timeout ago
// (kube-proxy uses 2 x syncPeriod) and has not been synced. And whether the process is
// alive (/livez): it is stuck when one piece of the sync loop's work (a sync, the periodic
// full sync's read) has been running for StuckTimeout or longer. A sync that returns an
// error, however often, is not stuck: the loop retries it, and a restart would not fix the
// object that makes it fail (it would only stop everything else from being programmed
// until the new process's first sync).
type Health struct {
	clock        clock.Clock
	timeout      time.Duration
	stuckTimeout time.Duration
	node         func() (*v1.Node, bool) // current node; ok=false when kipvs runs without a Node
	metrics      *metrics.Metrics

	mu            sync.RWMutex
	lastUpdated   map[string]time.Time
	oldestPending map[string]time.Time
	// running holds the work of the sync loop in progress (Begin), by id.
	running map[uint64]activity
	nextID  uint64
}

type activity struct {
	what  string
	since time.Time
}

// MinStuckTimeout is the least time one sync may run before /livez reports the process
// stuck (the timeout is the longer of this and twice the /healthz timeout, i.e. 4 x
// ipvs.syncPeriod). The longest sync is a first full sync; under qemu TCG it took 19.5 s
// at 10,000 Services x 10 endpoints (make bench-compare), 87 s at 10,000 x 2 against a real
// apiserver (deploy/README.md, Resource figures) and 95-119 s from the process start at
// 50,000 x 4 (make bench-first-sync; docs/performance.md). A sync that runs for minutes is
// stuck, or the node is far larger than these: raise ipvs.syncPeriod there.
const MinStuckTimeout = 2 * time.Minute

// NewHealth returns a tracker. node may be nil (standalone mode: the node is always eligible).
func NewHealth(c clock.Clock, timeout time.Duration, node func() (*v1.Node, bool), m *metrics.Metrics) *Health {
	if c == nil {
		c = clock.RealClock{}
	}
	return &Health{clock: c, timeout: timeout, stuckTimeout: max(2*timeout, MinStuckTimeout), node: node, metrics: m,
		lastUpdated: map[string]time.Time{}, oldestPending: map[string]time.Time{}, running: map[uint64]activity{}}
}

// StuckTimeout is how long one piece of the sync loop's work may run before /livez fails.
func (h *Health) StuckTimeout() time.Duration { return h.stuckTimeout }

// Begin records that the sync loop started a piece of work (what names it in /livez's
// answer); the returned func records its end, however it ended (an error included).
func (h *Health) Begin(what string) (end func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	id := h.nextID
	h.nextID++
	h.running[id] = activity{what: what, since: h.clock.Now()}
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.running, id)
	}
}

// Stuck describes the oldest piece of the sync loop's work that has run for StuckTimeout or
// longer ("" when none has: the process is alive).
func (h *Health) Stuck() string {
	h.mu.RLock()
	defer h.mu.RUnlock()
	now := h.clock.Now()
	var oldest *activity
	for _, a := range h.running {
		if now.Sub(a.since) >= h.stuckTimeout && (oldest == nil || a.since.Before(oldest.since)) {
			oldest = &a
		}
	}
	if oldest == nil {
		return ""
	}
	return fmt.Sprintf("%s running since %s (%s, limit %s)", oldest.what, oldest.since.UTC().Format(time.RFC3339),
		now.Sub(oldest.since).Truncate(time.Second), h.stuckTimeout)
}

// QueuedUpdate records that a change for family is waiting to be synced.
func (h *Health) QueuedUpdate(family string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.oldestPending[family]; !ok {
		h.oldestPending[family] = h.clock.Now()
	}
}

// Updated records a successful sync of family.
func (h *Health) Updated(family string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.oldestPending, family)
	h.lastUpdated[family] = h.clock.Now()
}

// FamilyHealth is one family's part of the report.
type FamilyHealth struct {
	LastUpdated time.Time `json:"lastUpdated"`
	Healthy     bool      `json:"healthy"`
}

// Report is the JSON body of /healthz and /livez (the same fields as kube-proxy's).
type Report struct {
	LastUpdated  time.Time               `json:"lastUpdated"`
	CurrentTime  time.Time               `json:"currentTime"`
	NodeEligible *bool                   `json:"nodeEligible,omitempty"`
	Healthy      bool                    `json:"healthy"`
	Status       map[string]FamilyHealth `json:"status,omitempty"`
	// Stuck (/livez only, kipvs's own field) names the work of the sync loop that has run
	// too long, when the process is stuck.
	Stuck string `json:"stuck,omitempty"`
}

// Report computes the current health. A family is unhealthy when an update has been
// pending for Timeout or longer, whether or not it ever synced: a first sync that keeps
// failing turns the proxy unhealthy after Timeout, as in kube-proxy. Before anything is
// queued (starting up) the proxy is healthy.
func (h *Health) Report() Report {
	h.mu.RLock()
	defer h.mu.RUnlock()
	now := h.clock.Now()
	r := Report{Healthy: true, CurrentTime: now, Status: map[string]FamilyHealth{}}
	fams := map[string]struct{}{}
	for fam := range h.lastUpdated {
		fams[fam] = struct{}{}
	}
	for fam := range h.oldestPending {
		fams[fam] = struct{}{}
	}
	for fam := range fams {
		last := h.lastUpdated[fam]
		if last.After(r.LastUpdated) {
			r.LastUpdated = last
		}
		fh := FamilyHealth{LastUpdated: last, Healthy: true}
		if pending, ok := h.oldestPending[fam]; ok && now.Sub(pending) >= h.timeout {
			fh.Healthy = false
			r.Healthy = false
		}
		r.Status[fam] = fh
	}
	return r
}

// NodeEligible is false while the node is being deleted or is tainted for removal.
func (h *Health) NodeEligible() bool {
	if h.node == nil {
		return true
	}
	n, ok := h.node()
	if !ok {
		return true
	}
	if n == nil || n.DeletionTimestamp != nil {
		return false
	}
	for _, t := range n.Spec.Taints {
		if t.Key == ToBeDeletedTaint {
			return false
		}
	}
	return true
}

// Handler serves /healthz (sync health and node eligibility, as kube-proxy's) and /livez
// (the process is not stuck; the body still carries the sync health, for information).
func (h *Health) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		r := h.Report()
		eligible := h.NodeEligible()
		r.NodeEligible = &eligible
		h.write(w, r, r.Healthy && eligible, h.counter("healthz"))
	})
	mux.HandleFunc("/livez", func(w http.ResponseWriter, _ *http.Request) {
		r := h.Report()
		r.Stuck = h.Stuck()
		r.Healthy = r.Stuck == ""
		h.write(w, r, r.Healthy, h.counter("livez"))
	})
	return mux
}

func (h *Health) counter(which string) func(code string) {
	return func(code string) {
		if h.metrics == nil {
			return
		}
		if which == "healthz" {
			h.metrics.ProxyHealthzTotal.WithLabelValues(code).Inc()
		} else {
			h.metrics.ProxyLivezTotal.WithLabelValues(code).Inc()
		}
	}
}

func (h *Health) write(w http.ResponseWriter, r Report, healthy bool, count func(string)) {
	status := http.StatusServiceUnavailable
	if healthy {
		// As kube-proxy: a healthy answer reports "now" as lastUpdated, for clients that
		// judge freshness by it.
		r.LastUpdated = h.clock.Now()
		status = http.StatusOK
	}
	count(strconv.Itoa(status))
	writeJSON(w, status, r)
}
