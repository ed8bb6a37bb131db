package logging

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"

	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"go.uber.org/zap/buffer"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
)

// New returns a logger writing kube-proxy's log lines to stderr: klog's text format
// ("text", "console" or "") or component-base's JSON format ("json"). verbosity is
// kube-proxy's -v and vmodule its --vmodule (pattern=N,...): a V(n) line is written when n
// is at most verbosity, or at most the level of the first pattern matching its source file.
// kipvs's own Debug lines are V(DebugV).
func New(format string, verbosity int, vmodule string) (*zap.Logger, error) {
	mods, err := parseVModule(vmodule)
	if err != nil {
		return nil, err
	}
	var enc encoder
	switch format {
	case "json":
		enc = jsonEncoder()
	case "", "console", "text":
		enc = textEncoder{pid: os.Getpid(), pool: buffer.NewPool()}
	default:
		return nil, fmt.Errorf("log format %q: must be text or json", format)
	}
	c := &core{enc: enc, out: zapcore.Lock(os.Stderr), gate: newGate(verbosity, mods)}
	return zap.New(c, zap.AddCaller()), nil
}

// SetVerbosity sets -v at run time, as kube-proxy's PUT /debug/flags/v: for kipvs's lines
// (log must come from New, or be derived from a logger that did) and for what client-go
// logs through klog. It returns kube-proxy's answer.
func SetVerbosity(log *zap.Logger, value string) (string, error) {
	v, err := strconv.ParseUint(value, 10, 31)
	if err != nil {
		return "", fmt.Errorf("verbosity %q: %w", value, err)
	}
	c, ok := log.Core().(*core)
	if !ok {
		return "", errors.New("the logger's verbosity cannot be changed")
	}
	var klogV klog.Level
	if err := klogV.Set(value); err != nil {
		return "", fmt.Errorf("failed set klog.logging.verbosity %s: %w", value, err)
	}
	c.gate.verbosity.Store(int32(v))
	return "successfully set klog.logging.verbosity to " + value, nil
}

// BridgeKlog sends everything client-go logs through klog to log, and sets klog's own
// verbosity (which gates client-go's klog.V(n) calls before they reach log) to verbosity and
// vmodule.
func BridgeKlog(log *zap.Logger, verbosity int, vmodule string) error {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	if err := fs.Set("v", strconv.Itoa(max(verbosity, 0))); err != nil {
		return fmt.Errorf("klog verbosity: %w", err)
	}
	if err := fs.Set("vmodule", vmodule); err != nil {
		return fmt.Errorf("klog vmodule: %w", err)
	}
	// zapr logs V(n) at zap level -n; klogCore moves those levels off kipvs's Debug level.
	bridged := log.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return klogCore{c} }))
	klog.SetLogger(zapr.NewLoggerWithOptions(bridged, zapr.ErrorKey(errorKey)))
	return nil
}

// Boot holds what is logged while the configuration, and with it the log format, is read
// (flags ignored with --config, deprecated fields): Replay writes it, in order and with its
// own times, through the logger of the configured format, so no line of another format
// comes before it.
type Boot struct {
	rec *recorder
}

// NewBoot returns a logger that records every entry, and the Boot to replay them.
func NewBoot() (*zap.Logger, *Boot) {
	rec := &recorder{}
	return zap.New(&recordCore{rec: rec}, zap.AddCaller()), &Boot{rec: rec}
}

// Replay writes the recorded entries through log (at its level) and forgets them.
func (b *Boot) Replay(log *zap.Logger) {
	for _, e := range b.rec.takeAll() {
		if ce := log.Core().Check(e.entry, nil); ce != nil {
			ce.Write(e.fields...)
		}
	}
}

// recordedEntry is one entry a Boot logger wrote, with all its fields (those added by
// With first).
type recordedEntry struct {
	entry  zapcore.Entry
	fields []zapcore.Field
}

// recorder is the shared, in-order store of a Boot logger's entries.
type recorder struct {
	mu      sync.Mutex
	entries []recordedEntry
}

func (r *recorder) add(e recordedEntry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.entries = append(r.entries, e)
}

func (r *recorder) takeAll() []recordedEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	all := r.entries
	r.entries = nil
	return all
}

// recordCore is a zapcore.Core that keeps every entry, at every level, in a recorder.
type recordCore struct {
	rec     *recorder
	context []zapcore.Field
}

func (c *recordCore) Enabled(zapcore.Level) bool { return true }

func (c *recordCore) With(fields []zapcore.Field) zapcore.Core {
	return &recordCore{rec: c.rec, context: append(slices.Clip(c.context), fields...)}
}

func (c *recordCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	return ce.AddCore(e, c)
}

func (c *recordCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	all := make([]zapcore.Field, 0, len(c.context)+len(fields))
	all = append(append(all, c.context...), fields...)
	c.rec.add(recordedEntry{entry: e, fields: all})
	return nil
}

func (c *recordCore) Sync() error { return nil }

// ReplayConsole replays the entries as text lines: for when the configuration could not
// be read, so its format is unknown.
func (b *Boot) ReplayConsole() {
	if log, err := New("text", 0, ""); err == nil {
		b.Replay(log)
		_ = log.Sync()
	}
}
