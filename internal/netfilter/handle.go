package netfilter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/vishvananda/netns"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/kerr"
)

// Tables is what a Handle reads and writes: the real iptables binaries (New) or another
// model of the kernel's tables, such as the fake's (NewWithTables).
type Tables interface {
	// Save returns `iptables-save -c` output: every table that exists, with counters.
	Save(ctx context.Context) ([]byte, error)
	// Restore applies an `iptables-restore --noflush --counters` payload (one section per
	// table, each committed on its own). A rejected payload returns a *RestoreError.
	Restore(ctx context.Context, payload string) error
}

// Handle is the netfilter adapter for one namespace and one family. It is safe for concurrent
// use; calls are serialised.
type Handle struct {
	family  inet.Family
	backend Backend
	owned   ownedSet
	tables  Tables
	mu      sync.Mutex
}

var _ Interface = (*Handle)(nil)

// Option configures New and NewWithTables.
type Option func(*options)

type options struct {
	runner Runner
	owned  ownedChains
}

// WithRunner runs the iptables binaries through r instead of executing them in the handle's
// namespace (unit tests check payloads this way, without root).
func WithRunner(r Runner) Option { return func(o *options) { o.runner = r } }

// New returns the adapter for family in the namespace ns (netns.None(): the current one), using
// the iptables backend b (see Detect). The handle does not take ownership of ns.
func New(ns netns.NsHandle, family inet.Family, b Backend, opts ...Option) (*Handle, error) {
	o := applyOptions(opts)
	if !validFamily(family) {
		return nil, fmt.Errorf("netfilter: family %s: %w", family, kerr.ErrInvalid)
	}
	if b.Mode != ModeNFT && b.Mode != ModeLegacy {
		return nil, fmt.Errorf("netfilter: backend mode %q: want %q or %q: %w", b.Mode, ModeNFT, ModeLegacy, kerr.ErrInvalid)
	}
	if o.runner == nil {
		o.runner = NewRunner(ns)
	}
	prefix := tool(family) + "-" + string(b.Mode)
	return newHandle(family, b, o.owned, &binaries{runner: o.runner, saveBin: prefix + "-save", restoreBin: prefix + "-restore"})
}

// NewWithTables returns the adapter for family reading and writing its tables through t
// instead of the iptables binaries; b is only what Backend reports. Of the options only the
// owned chains apply. The fake (netfiltertest) is a Handle on a model of the tables.
func NewWithTables(family inet.Family, b Backend, t Tables, opts ...Option) (*Handle, error) {
	return newHandle(family, b, applyOptions(opts).owned, t)
}

func applyOptions(opts []Option) options {
	o := options{owned: defaultOwned()}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

func newHandle(family inet.Family, b Backend, owned ownedChains, t Tables) (*Handle, error) {
	if !validFamily(family) {
		return nil, fmt.Errorf("netfilter: family %s: %w", family, kerr.ErrInvalid)
	}
	set, err := newOwnedSet(owned)
	if err != nil {
		return nil, fmt.Errorf("netfilter: %w", err)
	}
	return &Handle{family: family, backend: b, owned: set, tables: t}, nil
}

// Family implements Interface.
func (h *Handle) Family() inet.Family { return h.family }

// Backend implements Interface.
func (h *Handle) Backend() Backend { return h.backend }

// Apply implements Interface. It validates rs first (kerr.ErrInvalid, nothing written), reads
// all tables with one iptables-save, plans each owned table, writes the sections of the tables
// that differ with one iptables-restore (each section commits on its own, so each table changes
// atomically), then reads back and verifies them. A section the kernel rejects changes nothing
// in its table and stops the restore there; the tables committed before it are listed in the
// Result. The error wraps a *RestoreError and the kerr type of the failure.
func (h *Handle) Apply(ctx context.Context, rs Ruleset) (Result, error) {
	if err := validate(h.family, h.owned, rs); err != nil {
		return Result{}, fmt.Errorf("netfilter %s apply: %w", h.family, err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.apply(ctx, rs, "apply")
}

// Remove implements Interface.
func (h *Handle) Remove(ctx context.Context) (Result, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.apply(ctx, Ruleset{}, "remove")
}

func (h *Handle) apply(ctx context.Context, rs Ruleset, op string) (Result, error) {
	res := Result{Payloads: map[Table]string{}}
	states, err := h.read(ctx)
	if err != nil {
		return res, fmt.Errorf("netfilter %s %s: %w", h.family, op, err)
	}
	var (
		payload strings.Builder
		planned []Table
		ends    []int // last payload line of each planned table's section
		lines   int
	)
	for _, table := range h.owned.tables {
		p := plan(states[table], rs[table], h.owned)
		if p == "" {
			continue
		}
		payload.WriteString(p)
		lines += strings.Count(p, "\n")
		planned = append(planned, table)
		ends = append(ends, lines)
		res.Payloads[table] = p
	}
	if len(planned) == 0 {
		return res, nil
	}
	if err := h.tables.Restore(ctx, payload.String()); err != nil {
		failed := Table("")
		var re *RestoreError
		if errors.As(err, &re) && re.Line > 0 {
			for i, end := range ends {
				if re.Line <= end {
					failed = planned[i]
					break
				}
				res.Restored = append(res.Restored, planned[i])
			}
		}
		for _, t := range planned {
			if !slices.Contains(res.Restored, t) {
				delete(res.Payloads, t)
			}
		}
		if failed != "" {
			return res, fmt.Errorf("netfilter %s %s: table %s: %w", h.family, op, failed, err)
		}
		return res, fmt.Errorf("netfilter %s %s: %w", h.family, op, err)
	}
	res.Restored = planned
	after, err := h.read(ctx)
	if err != nil {
		return res, fmt.Errorf("netfilter %s %s: read back: %w", h.family, op, err)
	}
	for _, table := range planned {
		want := rs[table]
		if d := Diff(Ruleset{table: want}, Ruleset{table: after[table].owned(h.owned.chains[table])}); d != nil {
			return res, fmt.Errorf("netfilter %s %s: table %s differs from the ruleset right after the restore "+
				"(a rule not in iptables-save canonical form, or a concurrent writer): %s: %w",
				h.family, op, table, d[0], kerr.ErrInvalid)
		}
	}
	return res, nil
}

// Observe implements Interface.
func (h *Handle) Observe(ctx context.Context) (Ruleset, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	states, err := h.read(ctx)
	if err != nil {
		return nil, fmt.Errorf("netfilter %s observe: %w", h.family, err)
	}
	rs := Ruleset{}
	for _, table := range h.owned.tables {
		if tr := states[table].owned(h.owned.chains[table]); len(tr.Chains)+len(tr.Jumps) > 0 {
			rs[table] = tr
		}
	}
	return rs, nil
}

// Dump implements Interface: Format of Observe.
func (h *Handle) Dump(ctx context.Context) (string, error) {
	rs, err := h.Observe(ctx)
	if err != nil {
		return "", err
	}
	return Format(rs), nil
}

// read reads the owned tables with one iptables-save.
func (h *Handle) read(ctx context.Context) (map[Table]*tableState, error) {
	out, err := h.tables.Save(ctx)
	if err != nil {
		return nil, fmt.Errorf("read tables: %w", err)
	}
	return parseTables(out, h.owned.tables)
}

// Check implements Interface: `iptables-restore --test` of one rule in a scratch chain.
func (h *Handle) Check(ctx context.Context, table Table, rule string) error {
	b, ok := h.tables.(*binaries)
	if !ok {
		return nil
	}
	payload := fmt.Sprintf("*%s\n:KIPVS-PROBE - [0:0]\n-A KIPVS-PROBE %s\nCOMMIT\n", table, rule)
	if _, err := b.runner.Run(ctx, []byte(payload), b.restoreBin, "--test", "--noflush", "-w", "5"); err != nil {
		return fmt.Errorf("%s --test of %q in table %s: %w", b.restoreBin, rule, table, err)
	}
	return nil
}
