package logging

import (
	"fmt"

	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"k8s.io/klog/v2"
)

// New returns a logger writing JSON ("json") or human-readable console lines ("console" or
// "") to stderr. verbosity is kube-proxy's -v: V(n) messages appear when n <= verbosity.
func New(format string, verbosity int) (*zap.Logger, error) {
	var cfg zap.Config
	switch format {
	case "json":
		cfg = zap.NewProductionConfig()
		cfg.EncoderConfig.TimeKey = "ts"
		cfg.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	case "", "console", "text":
		cfg = zap.NewDevelopmentConfig()
		cfg.DisableStacktrace = true
		cfg.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	default:
		return nil, fmt.Errorf("log format %q: must be json or console", format)
	}
	cfg.Sampling = nil
	cfg.Development = false
	if verbosity < 0 {
		verbosity = 0
	}
	// zapr maps V(n) to zap level -n; Info is level 0.
	cfg.Level = zap.NewAtomicLevelAt(zapcore.Level(-min(verbosity, 127)))
	return cfg.Build()
}

// BridgeKlog sends everything client-go logs through klog to log.
func BridgeKlog(log *zap.Logger) {
	klog.SetLogger(zapr.NewLogger(log.WithOptions(zap.AddCallerSkip(0)).Named("client-go")))
}

// Boot holds what is logged while the configuration, and with it the log format, is read
// (flags ignored with --config, deprecated fields): Replay writes it, in order and with its
// own times, through the logger of the configured format, so no line of another format
// comes before it.
type Boot struct {
	logs *observer.ObservedLogs
}

// NewBoot returns a logger that records every entry, and the Boot to replay them.
func NewBoot() (*zap.Logger, *Boot) {
	core, logs := observer.New(zapcore.DebugLevel)
	return zap.New(core, zap.AddCaller()), &Boot{logs: logs}
}

// Replay writes the recorded entries through log (at its level) and forgets them.
func (b *Boot) Replay(log *zap.Logger) {
	for _, e := range b.logs.TakeAll() {
		if ce := log.Core().Check(e.Entry, nil); ce != nil {
			ce.Write(e.Context...)
		}
	}
}

// ReplayConsole replays the entries as console lines: for when the configuration could
// not be read, so its format is unknown.
func (b *Boot) ReplayConsole() {
	if log, err := New("console", 0); err == nil {
		b.Replay(log)
		_ = log.Sync()
	}
}
