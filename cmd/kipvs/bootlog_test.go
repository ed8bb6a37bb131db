package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// stderrOf runs kipvs with args in this process and returns what it wrote to stderr (the
// loggers write to os.Stderr, which is a pipe meanwhile).
func stderrOf(t *testing.T, args ...string) string {
	t.Helper()
	var err error
	out := captureStderr(t, func() {
		cmd := newRootCommand()
		cmd.SetArgs(args)
		cmd.SetOut(io.Discard)
		err = cmd.Execute()
	})
	if err != nil {
		t.Fatalf("kipvs %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// With the JSON log format every line kipvs writes to stderr is JSON, the warnings about
// the command line (written while the configuration, and with it the format, is read)
// included. The format comes from --kipvs-log-format or the file's logging.format.
func TestBootLogHonoursTheLogFormat(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(file, []byte("apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: ipvs\nlogging: {format: json}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		// --ipvs-scheduler is ignored with --config: a warning while the file is read.
		{"run", "--config", file, "--ipvs-scheduler=lc", "--write-config-to", filepath.Join(dir, "out1.yaml")},
		{"run", "--kipvs-log-format=json", "--config", file, "--ipvs-scheduler=lc", "--write-config-to", filepath.Join(dir, "out2.yaml")},
	} {
		out := stderrOf(t, args...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) < 2 || !strings.Contains(out, "ipvs-scheduler") {
			t.Errorf("%v: want the ignored flag's warning and the write's line on stderr, got:\n%s", args, out)
		}
		for _, l := range lines {
			var v map[string]any
			if err := json.Unmarshal([]byte(l), &v); err != nil {
				t.Errorf("%v: a stderr line is not JSON (%v): %s", args, err, l)
			}
		}
	}
	// The console format stays the default.
	plain := filepath.Join(dir, "plain.yaml")
	if err := os.WriteFile(plain, []byte("apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: ipvs\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := stderrOf(t, "run", "--config", plain, "--ipvs-scheduler=lc", "--write-config-to", filepath.Join(dir, "out3.yaml"))
	if bytes.HasPrefix([]byte(strings.TrimSpace(out)), []byte("{")) {
		t.Errorf("console format: %s", out)
	}
}
