package harness

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kipvs/kipvs/internal/testutil/poll"
)

// Result is one request of a Loop.
type Result struct {
	Start, End time.Time
	Answer     Answer
	Err        error
}

// Loop sends requests one after another (at most one per Interval) until stopped, and
// records every result.
type Loop struct {
	Name     string
	client   Client
	proto    Proto
	addr     netip.AddrPort
	interval time.Duration

	mu      sync.Mutex
	results []Result
	stop    chan struct{}
	done    chan struct{}
}

// StartLoop starts a request loop; Stop it (it is also stopped by t.Cleanup).
func StartLoop(t testing.TB, name string, c Client, p Proto, addr netip.AddrPort, interval time.Duration) *Loop {
	l := &Loop{Name: name, client: c, proto: p, addr: addr, interval: interval,
		stop: make(chan struct{}), done: make(chan struct{})}
	go l.run()
	t.Cleanup(l.Stop)
	return l
}

func (l *Loop) run() {
	defer close(l.done)
	tick := time.NewTicker(l.interval) // pacing, so the loops leave CPU to kipvs under TCG
	defer tick.Stop()
	for {
		select {
		case <-l.stop:
			return
		default:
		}
		start := time.Now()
		a, err := l.client.Do(l.proto, l.addr)
		l.mu.Lock()
		l.results = append(l.results, Result{Start: start, End: time.Now(), Answer: a, Err: err})
		l.mu.Unlock()
		select {
		case <-l.stop:
			return
		case <-tick.C:
		}
	}
}

// Stop ends the loop after the request in flight; stopping twice is fine.
func (l *Loop) Stop() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	<-l.done
}

// Results returns a copy of the results so far.
func (l *Loop) Results() []Result {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Result(nil), l.results...)
}

// Since returns the results of requests started at or after t.
func (l *Loop) Since(t time.Time) []Result {
	var out []Result
	for _, r := range l.Results() {
		if !r.Start.Before(t) {
			out = append(out, r)
		}
	}
	return out
}

// WaitSince waits until n requests started at or after t have completed.
func (l *Loop) WaitSince(tb testing.TB, t time.Time, n int, limit time.Duration) []Result {
	tb.Helper()
	var rs []Result
	poll.Until(tb, limit, fmt.Sprintf("%d requests of loop %s", n, l.Name), func() (bool, string) {
		rs = l.Since(t)
		return len(rs) >= n, fmt.Sprintf("%d completed", len(rs))
	})
	return rs
}

// Summary counts results: total, failed, and answers per backend.
type Summary struct {
	Total, Failed int
	Backends      map[string]int
	Sources       map[netip.Addr]int
	FirstErrors   []string
}

// Summarize counts rs.
func Summarize(rs []Result) Summary {
	s := Summary{Backends: map[string]int{}, Sources: map[netip.Addr]int{}}
	for _, r := range rs {
		s.Total++
		if r.Err != nil {
			s.Failed++
			if len(s.FirstErrors) < 5 {
				s.FirstErrors = append(s.FirstErrors, r.Start.Format("15:04:05.000")+" "+r.Err.Error())
			}
			continue
		}
		s.Backends[r.Answer.Backend]++
		s.Sources[r.Answer.Source.Addr()]++
	}
	return s
}

func (s Summary) String() string {
	names := make([]string, 0, len(s.Backends))
	for n := range s.Backends {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	fmt.Fprintf(&b, "%d requests, %d failed; backends", s.Total, s.Failed)
	for _, n := range names {
		fmt.Fprintf(&b, " %s=%d", n, s.Backends[n])
	}
	if len(s.FirstErrors) > 0 {
		fmt.Fprintf(&b, "; first errors: %s", strings.Join(s.FirstErrors, "; "))
	}
	return b.String()
}
