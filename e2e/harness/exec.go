package harness

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Run runs a command in the node's namespace and returns its stdout; stderr is in the error.
// The command is killed after 2 minutes.
func Run(name string, args ...string) (string, error) {
	return RunWithin(2*time.Minute, name, args...)
}

// RunWithin is Run with another time limit, for commands that are slow under TCG.
func RunWithin(limit time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// MustRun is Run that fails the test on error.
func MustRun(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := Run(name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
