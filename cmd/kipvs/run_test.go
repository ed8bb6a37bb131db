package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/kipvs/kipvs/internal/config"
)

// kube-proxy exits (with an error, so non-zero) when its --config file changes, for the
// kubelet or systemd to restart it with the new file; `kipvs run` does the same by ending
// its context: the daemon stops cleanly and the run returns the change.
func TestRunExitsWhenTheConfigFileChanges(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := config.WatchFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	core, logs := observer.New(zapcore.InfoLevel)
	done := make(chan error, 1)
	go func() { done <- exitOnConfigChange(ctx, w.Wait, cancel, zap.New(core)) }()

	if err := os.WriteFile(path, []byte("b"), 0o644); err != nil {
		t.Fatal(err)
	}
	<-ctx.Done() // the run is being stopped
	err = <-done
	var fc *config.FileChangedError
	if !errors.As(err, &fc) || fc.Path != path {
		t.Fatalf("exitOnConfigChange = %v, want the change of %s", err, path)
	}
	if exitCode(err) == 0 {
		t.Errorf("exit code 0 for %v", err)
	}
	entries := logs.All()
	if len(entries) != 1 || entries[0].Message != "config file changed, exiting to be restarted with it" ||
		entries[0].ContextMap()["path"] != path || entries[0].ContextMap()["event"] != "WRITE" {
		t.Errorf("log: %v", entries)
	}
}

// A run stopped for another reason (SIGTERM) does not report a change.
func TestRunStoppedWithoutConfigChange(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := config.WatchFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	stopped := false
	if err := exitOnConfigChange(ctx, w.Wait, func() { stopped = true }, zap.NewNop()); err != nil || stopped {
		t.Errorf("exitOnConfigChange = %v, stopped %t; want nil, false", err, stopped)
	}
}
