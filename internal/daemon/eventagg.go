package daemon

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// EventInterval is the least time between two Warning Events this node sends about one
// object (a Service, or the Node) with one reason. What comes up meanwhile is counted, and
// goes out as one Event, with the count, once the interval has passed.
const EventInterval = time.Minute

// eventTick is how often the daemon sends what waited for its interval.
const eventTick = 10 * time.Second

// eventExamples is how many of the aggregated messages an Event's note quotes (the log has
// every one).
const eventExamples = 3

// eventKey is what one Event is about: a Service (node empty) or a Node, and a reason.
type eventKey struct {
	svc    types.NamespacedName
	node   string
	reason string
}

// eventBucket holds the problems of one key not sent yet, and when the last Event went out.
type eventBucket struct {
	lastSent time.Time
	sent     bool
	count    int
	examples []string
}

// eventAggregator turns the daemon's Warn calls into at most one Event per object and reason
// per EventInterval, with a count: one Service with 2,000 bad externalIPs is one Event, not
// 2,000, and a problem that comes and goes every sync is one Event a minute. Calls are only
// recorded; flush sends what may go out (the daemon flushes at the end of each sync and on a
// ticker, so what waits for its interval still goes out when nothing syncs). It is safe for
// concurrent use (the health check servers report from their own goroutines).
type eventAggregator struct {
	sink     EventSink
	clock    clock.Clock
	interval time.Duration

	mu      sync.Mutex
	buckets map[eventKey]*eventBucket
}

func newEventAggregator(sink EventSink, clk clock.Clock, interval time.Duration) *eventAggregator {
	return &eventAggregator{sink: sink, clock: clk, interval: interval, buckets: map[eventKey]*eventBucket{}}
}

var _ EventSink = (*eventAggregator)(nil)

func (a *eventAggregator) Warn(svc types.NamespacedName, reason, message string) {
	a.add(eventKey{svc: svc, reason: reason}, message)
}

func (a *eventAggregator) WarnNode(node, reason, message string) {
	a.add(eventKey{node: node, reason: reason}, message)
}

// StartNode is recorded as it comes: there is one of each per start.
func (a *eventAggregator) StartNode(node, eventType, reason, message string) {
	a.sink.StartNode(node, eventType, reason, message)
}

// count adds n problems of svc with reason to its next Event's count, without examples
// (the daemon's report logs the first problems of a Service one by one, and these only as
// a count).
func (a *eventAggregator) count(svc types.NamespacedName, reason string, n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	k := eventKey{svc: svc, reason: reason}
	b := a.buckets[k]
	if b == nil {
		b = &eventBucket{}
		a.buckets[k] = b
	}
	b.count += n
}

func (a *eventAggregator) add(k eventKey, message string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	b := a.buckets[k]
	if b == nil {
		b = &eventBucket{}
		a.buckets[k] = b
	}
	b.count++
	if len(b.examples) < eventExamples && !slices.Contains(b.examples, message) {
		b.examples = append(b.examples, message)
	}
}

// flush sends one Event for every key with problems whose last Event is at least an interval
// old (or that never had one), and forgets the keys that have been quiet for an interval.
func (a *eventAggregator) flush() {
	type out struct {
		k    eventKey
		note string
	}
	var send []out
	a.mu.Lock()
	now := a.clock.Now()
	for k, b := range a.buckets {
		due := !b.sent || now.Sub(b.lastSent) >= a.interval
		switch {
		case b.count > 0 && due:
			send = append(send, out{k, aggregatedNote(b.count, b.examples, a.interval)})
			b.sent, b.lastSent, b.count, b.examples = true, now, 0, nil
		case b.count == 0 && due:
			delete(a.buckets, k)
		}
	}
	a.mu.Unlock()
	// Sent outside the lock: a sink may block (the API sink queues without blocking).
	for _, o := range send {
		if o.k.node != "" {
			a.sink.WarnNode(o.k.node, o.k.reason, o.note)
		} else {
			a.sink.Warn(o.k.svc, o.k.reason, o.note)
		}
	}
}

// aggregatedNote is the note of an Event standing for count problems: the message itself
// when there is one, else the count and the first messages (none for problems only
// counted: eventAggregator.count).
func aggregatedNote(count int, examples []string, interval time.Duration) string {
	if count == 1 && len(examples) == 1 {
		return examples[0]
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d problems (at most one Event per %s; kipvs's log has the first %d of each Service)", count, interval, maxReportedProblems)
	if len(examples) > 0 {
		fmt.Fprintf(&b, ": %s", strings.Join(examples, "; "))
	}
	if more := count - len(examples); more > 0 {
		fmt.Fprintf(&b, "; and %d more", more)
	}
	return b.String()
}
