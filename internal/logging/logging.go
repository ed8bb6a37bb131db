package logging

import (
	"fmt"

	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
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
