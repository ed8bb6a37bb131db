package logging

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"

	"go.uber.org/zap/buffer"
	"go.uber.org/zap/zapcore"
)

// DebugV is the verbosity of kipvs's Debug lines: kube-proxy logs its per-sync and
// per-object detail at V(4).
const DebugV = 4

// errorKey is the key of a line's error, as in kube-proxy's logs (zap's own is "error").
const errorKey = "err"

// verbosityOf returns the V level of a zap level: Info and above are V(0), kipvs's Debug is
// V(DebugV), and the levels below Debug are the bridged klog V(n) lines (see klogCore).
func verbosityOf(l zapcore.Level) int {
	switch {
	case l >= zapcore.InfoLevel:
		return 0
	case l == zapcore.DebugLevel:
		return DebugV
	default:
		return -int(l) - 1
	}
}

// klogCore carries the lines of the klog bridge: zapr logs V(n) at zap level -n, which
// for n = 1 is kipvs's Debug level, so the bridge's levels below Info move one further
// down (V(n) at -n-1, which verbosityOf reads back as n).
type klogCore struct{ zapcore.Core }

func klogLevel(l zapcore.Level) zapcore.Level {
	if l >= zapcore.InfoLevel || l == zapcore.Level(-128) {
		return l
	}
	return l - 1
}

func (c klogCore) Enabled(l zapcore.Level) bool { return c.Core.Enabled(klogLevel(l)) }

func (c klogCore) With(fields []zapcore.Field) zapcore.Core { return klogCore{c.Core.With(fields)} }

func (c klogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	e.Level = klogLevel(e.Level)
	return c.Core.Check(e, ce)
}

// modulePat is one --vmodule pattern: a glob matched against a source file's base name
// without ".go", as klog does.
type modulePat struct {
	pattern string
	level   int
}

// CheckVModule returns why s is not a valid --vmodule (pattern=N,..., klog's syntax; an
// empty list is valid), or nil.
func CheckVModule(s string) error {
	_, err := parseVModule(s)
	return err
}

func parseVModule(s string) ([]modulePat, error) {
	var out []modulePat
	for _, p := range strings.Split(s, ",") {
		if p == "" {
			continue
		}
		pat, lv, ok := strings.Cut(p, "=")
		if !ok || pat == "" || strings.Contains(lv, "=") {
			return nil, fmt.Errorf("vmodule %q: expect comma-separated list of pattern=N", s)
		}
		n, err := strconv.ParseInt(lv, 10, 32)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("vmodule %q: %q is not a verbosity (0 or more)", s, lv)
		}
		if _, err := filepath.Match(pat, ""); err != nil {
			return nil, fmt.Errorf("vmodule %q: pattern %q: %w", s, pat, err)
		}
		if n > 0 {
			out = append(out, modulePat{pattern: pat, level: int(n)})
		}
	}
	return out, nil
}

// gate decides which V levels are written: up to verbosity everywhere, and up to a
// pattern's level in the source files it matches (the first matching pattern counts).
// verbosity is shared by every core derived from one logger and may change at run time
// (SetVerbosity).
type gate struct {
	verbosity *atomic.Int32
	modMax    int // the highest level of a pattern
	modules   []modulePat
}

func newGate(verbosity int, modules []modulePat) gate {
	g := gate{verbosity: new(atomic.Int32), modules: modules}
	g.verbosity.Store(int32(max(verbosity, 0)))
	for _, m := range modules {
		g.modMax = max(g.modMax, m.level)
	}
	return g
}

// enabled reports whether level may be written from some source file.
func (g gate) enabled(l zapcore.Level) bool {
	return verbosityOf(l) <= max(int(g.verbosity.Load()), g.modMax)
}

// allows reports whether level is written from the source file file.
func (g gate) allows(l zapcore.Level, file string) bool {
	v := verbosityOf(l)
	if v <= int(g.verbosity.Load()) {
		return true
	}
	name := strings.TrimSuffix(filepath.Base(file), ".go")
	for _, m := range g.modules {
		if ok, _ := filepath.Match(m.pattern, name); ok {
			return v <= m.level
		}
	}
	return false
}

// encoder encodes one log line: ctx are the logger's fields (With), fields the line's own.
type encoder interface {
	encode(e zapcore.Entry, ctx, fields []zapcore.Field) (*buffer.Buffer, error)
}

// core is the zap core of kipvs's logger: it keeps the context fields (With) as fields, so
// that each line is encoded in one go in kube-proxy's key order.
type core struct {
	enc    encoder
	out    zapcore.WriteSyncer
	gate   gate
	fields []zapcore.Field
}

func (c *core) Enabled(l zapcore.Level) bool { return c.gate.enabled(l) }

func (c *core) With(fields []zapcore.Field) zapcore.Core {
	clone := *c
	clone.fields = append(append([]zapcore.Field(nil), c.fields...), fields...)
	return &clone
}

func (c *core) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *core) Write(e zapcore.Entry, fields []zapcore.Field) error {
	// The source file is known here, not in Check.
	if !c.gate.allows(e.Level, e.Caller.File) {
		return nil
	}
	b, err := c.enc.encode(e, renameErrors(c.fields), renameErrors(fields))
	if err != nil {
		return err
	}
	defer b.Free()
	_, err = c.out.Write(b.Bytes())
	if e.Level > zapcore.ErrorLevel {
		err = errors.Join(err, c.out.Sync())
	}
	return err
}

func (c *core) Sync() error { return c.out.Sync() }

// renameErrors returns fields with zap's error key renamed to kube-proxy's.
func renameErrors(fields []zapcore.Field) []zapcore.Field {
	out := make([]zapcore.Field, len(fields))
	for i, f := range fields {
		if f.Type == zapcore.ErrorType && f.Key == "error" {
			f.Key = errorKey
		}
		out[i] = f
	}
	return out
}

// errorsMoved returns fields with the error fields moved to the end (first is false) or to
// the front (first is true), otherwise in order.
func errorsMoved(fields []zapcore.Field, first bool) []zapcore.Field {
	out := make([]zapcore.Field, 0, len(fields))
	var errs []zapcore.Field
	for _, f := range fields {
		if f.Key == errorKey && f.Type == zapcore.ErrorType {
			errs = append(errs, f)
		} else {
			out = append(out, f)
		}
	}
	if first {
		return append(errs, out...)
	}
	return append(out, errs...)
}
