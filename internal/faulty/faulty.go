package faulty

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"sync"
	"syscall"

	"github.com/kipvs/kipvs/internal/kerr"
)

// Transient is the default error pool: the errnos a healthy kernel can answer to any request
// under pressure. EBUSY also matches kerr.ErrBusy.
var Transient = []syscall.Errno{syscall.ENOMEM, syscall.EBUSY, syscall.EAGAIN, syscall.ENOBUFS, syscall.EINTR}

// Error is an injected failure of the request Op; its text is "injected fault: " and the
// chosen error (the fake adds the request). It wraps the chosen error, so errors.Is matches it (and, for
// an errno, the kerr type kerr.Errno maps it to), and IsInjected tells it from a real one.
type Error struct {
	Op  string
	Err error
}

func (e *Error) Error() string { return e.Err.Error() }

func (e *Error) Unwrap() error { return e.Err }

// IsInjected reports whether err is, or wraps, an injected *Error.
func IsInjected(err error) bool {
	var e *Error
	return errors.As(err, &e)
}

// Injector decides which requests fail. The zero value is not usable; see New.
type Injector struct {
	mu          sync.Mutex
	seed        uint64
	write, read float64
	errs        []error
	only        func(op string) bool
	seen        map[string]uint64
	log         []string
}

// New returns an Injector failing each mutation with probability p (0 ≤ p ≤ 1) and no read,
// choosing uniformly among errs (none given: the errnos in Transient, wrapped with kerr.Errno
// so they carry their kerr type).
func New(seed uint64, p float64, errs ...error) *Injector {
	if len(errs) == 0 {
		for _, e := range Transient {
			errs = append(errs, e)
		}
	}
	return &Injector{seed: seed, write: clamp(p), errs: slices.Clone(errs), seen: map[string]uint64{}}
}

func clamp(p float64) float64 { return min(max(p, 0), 1) }

// SetProbability sets the probabilities of failing a mutation and a read; (0, 0) turns the
// Injector off without forgetting what it has seen.
func (in *Injector) SetProbability(write, read float64) {
	if in == nil {
		return
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	in.write, in.read = clamp(write), clamp(read)
}

// SetFilter limits the faults to the requests whose description only accepts (nil: all), to
// leave a class of faults out, e.g. `func(op string) bool { return !strings.HasPrefix(op,
// "ipvs delete service ") }`. The descriptions start with the adapter's name ("ipvs",
// "ipset", "iptables-save", "iptables-restore", "dummyif", "sysctl", "conntrack").
func (in *Injector) SetFilter(only func(op string) bool) {
	if in == nil {
		return
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	in.only = only
}

// Mutation is asked by a fake before a request that changes kernel state; a non-nil result
// fails the request, which must then change nothing.
func (in *Injector) Mutation(op string) error { return in.decide(op, false) }

// Read is asked by a fake before a request that only reads kernel state.
func (in *Injector) Read(op string) error { return in.decide(op, true) }

// Injected lists the requests failed so far, in order, each as "op: error".
func (in *Injector) Injected() []string {
	if in == nil {
		return nil
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	return slices.Clone(in.log)
}

func (in *Injector) decide(op string, read bool) error {
	if in == nil {
		return nil
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	p := in.write
	if read {
		p = in.read
	}
	n := in.seen[op]
	in.seen[op] = n + 1
	if p == 0 || (in.only != nil && !in.only(op)) {
		return nil
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(op))
	rng := rand.New(rand.NewPCG(in.seed, h.Sum64()+n*0x9e3779b97f4a7c15))
	if rng.Float64() >= p {
		return nil
	}
	err := in.errs[rng.IntN(len(in.errs))]
	var errno syscall.Errno
	if errors.As(err, &errno) {
		err = kerr.Errno("injected fault", err)
	} else {
		err = fmt.Errorf("injected fault: %w", err)
	}
	in.log = append(in.log, op+": "+err.Error())
	return &Error{Op: op, Err: err}
}
