// Package sysctltest holds the in-memory fake of package sysctl's kernel adapter, for tests:
// it models the kernel's state, answers with the same typed errors and can fail at random
// (SetFaulty). Only tests import it, so it stays out of the kipvs binary.
package sysctltest

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/kipvs/kipvs/internal/faulty"
	"github.com/kipvs/kipvs/internal/kerr"
	"github.com/kipvs/kipvs/internal/sysctl"
)

// FaultFunc is consulted before every Get and Set of the fake with the operation ("get" or
// "set") and the key in slash form. A non-nil result fails the call with that error,
// wrapped like a file error of the real implementation, and changes nothing.
type FaultFunc func(op, path string) error

// Fake is a map-backed Interface with the semantics of the real implementation: keys in
// either form, normalised values, kerr.ErrNotFound for a key it does not hold (the kernel
// never creates keys), no write when the value is already there, and a read-only mode
// that fails writes with EROFS. It is safe for concurrent use.
//
// SetFaulty (faulty.Switch) makes the fake fail requests at random as its Injector decides: each Set that
// would write (a value already in place is not written, so never fails) as a mutation that
// then changes nothing, each Get as a read. Dump and Values never fail. The fault hook is
// consulted first.
//
// SetFault (faulty.Hook) installs the fault hook (nil: removes it), asked before the Injector.
type Fake struct {
	faulty.Switch
	faulty.Hook[FaultFunc]
	mu       sync.Mutex
	vals     map[string]string // slash-form path -> normalised value
	readOnly bool
	writes   int
}

var _ sysctl.Interface = (*Fake)(nil)

// NewFake returns a fake holding the given keys (either form) and values.
// It panics on a malformed key, as it is meant for tests.
func NewFake(initial map[string]string) *Fake {
	f := &Fake{vals: map[string]string{}}
	for k, v := range initial {
		p, err := sysctl.Path(k)
		if err != nil {
			panic(err)
		}
		f.vals[p] = sysctl.Normalize(v)
	}
	return f
}

// Add creates key with value (a key the real kernel would have, e.g. once a module loads).
func (f *Fake) Add(key, value string) error {
	p, err := sysctl.Path(key)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.vals[p] = sysctl.Normalize(value)
	return nil
}

// SetReadOnly makes every write fail with EROFS, like a read-only /proc/sys mount.
func (f *Fake) SetReadOnly(ro bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.readOnly = ro
}

// Writes returns how many values the fake has written (Sets that changed something).
func (f *Fake) Writes() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.writes
}

// Values returns a copy of every key (slash form) and value.
func (f *Fake) Values() map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.vals)
}

// Dump returns "key = value" lines in slash form, sorted by key.
func (f *Fake) Dump() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(f.vals)) {
		fmt.Fprintf(&b, "%s = %s\n", k, f.vals[k])
	}
	return b.String()
}

// Get implements sysctl.Interface.
func (f *Fake) Get(key string) (string, error) {
	p, err := sysctl.Path(key)
	if err != nil {
		return "", err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if fault := f.Fault(); fault != nil {
		if err := fault("get", p); err != nil {
			return "", sysctl.FileErr("get", key, err)
		}
	}
	if err := f.Injector().Read("sysctl get " + p); err != nil {
		return "", sysctl.FileErr("get", key, err)
	}
	v, err := f.lookup(p)
	if err != nil {
		return "", sysctl.FileErr("get", key, err)
	}
	return v, nil
}

// Set implements sysctl.Interface.
func (f *Fake) Set(key, value string) (string, bool, error) {
	p, err := sysctl.Path(key)
	if err != nil {
		return "", false, err
	}
	want := sysctl.Normalize(value)
	if want == "" {
		return "", false, fmt.Errorf("sysctl %s: set empty value: %w", key, kerr.ErrInvalid)
	}
	op := fmt.Sprintf("set %q", want)
	f.mu.Lock()
	defer f.mu.Unlock()
	if fault := f.Fault(); fault != nil {
		if err := fault("set", p); err != nil {
			return "", false, sysctl.FileErr(op, key, err)
		}
	}
	old, err := f.lookup(p)
	if err != nil {
		return "", false, sysctl.FileErr(op, key, err)
	}
	if old == want {
		return old, false, nil
	}
	if f.readOnly {
		return old, false, sysctl.FileErr(op, key, syscall.EROFS)
	}
	if err := f.Injector().Mutation("sysctl set " + p); err != nil {
		return old, false, sysctl.FileErr(op, key, err)
	}
	f.vals[p] = want
	f.writes++
	return old, true, nil
}

// lookup returns the value at path p or the errno the file system would give: EISDIR for
// a directory (a prefix of other keys), ENOTDIR for a path through a key, else ENOENT.
// Callers hold f.mu.
func (f *Fake) lookup(p string) (string, error) {
	if v, ok := f.vals[p]; ok {
		return v, nil
	}
	for k := range f.vals {
		if strings.HasPrefix(k, p+"/") {
			return "", syscall.EISDIR
		}
	}
	for i := strings.IndexByte(p, '/'); i >= 0; i = nextSlash(p, i) {
		if _, ok := f.vals[p[:i]]; ok {
			return "", syscall.ENOTDIR
		}
	}
	return "", syscall.ENOENT
}

func nextSlash(p string, i int) int {
	j := strings.IndexByte(p[i+1:], '/')
	if j < 0 {
		return -1
	}
	return i + 1 + j
}
