package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/pflag"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/kipvs/kipvs/internal/config"
)

// kube-proxy writes its oomScoreAdj (default -999) to /proc/self/oom_score_adj when it
// starts running; so does kipvs.
func TestApplyOOMScoreAdj(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"default", nil, "-999"},
		{"flag", []string{"--oom-score-adj=-500"}, "-500"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := loadRunConfig(t, tc.args...)
			path := filepath.Join(t.TempDir(), "oom_score_adj")
			if err := os.WriteFile(path, []byte("0\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			core, logs := observer.New(zapcore.WarnLevel)
			applyOOMScoreAdj(path, cfg.OOMScoreAdj, zap.New(core))
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("oom_score_adj = %q, want %q", got, tc.want)
			}
			if logs.Len() != 0 {
				t.Errorf("unexpected warnings: %v", logs.All())
			}
		})
	}
}

// A failure to set it is a warning, not fatal.
func TestApplyOOMScoreAdjFailureWarns(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	applyOOMScoreAdj(filepath.Join(t.TempDir(), "no", "such", "file"), -999, zap.New(core))
	if logs.Len() != 1 || logs.All()[0].ContextMap()["oomScoreAdj"] != int32(-999) {
		t.Errorf("warnings: %v", logs.All())
	}
}

func loadRunConfig(t *testing.T, args ...string) config.Config {
	t.Helper()
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	flags := config.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(flags, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
