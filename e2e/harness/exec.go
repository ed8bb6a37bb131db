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
func Run(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
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

// Poll calls cond every interval until it reports done, and fails the test with the last
// detail when limit passes first. It returns how long it took.
func Poll(t testing.TB, limit time.Duration, what string, cond func() (done bool, detail string)) time.Duration {
	t.Helper()
	d, err := PollErr(limit, what, cond)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// PollErr is Poll returning an error instead of failing the test.
func PollErr(limit time.Duration, what string, cond func() (done bool, detail string)) (time.Duration, error) {
	start := time.Now()
	deadline := start.Add(limit)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		done, detail := cond()
		if done {
			return time.Since(start), nil
		}
		if time.Now().After(deadline) {
			return time.Since(start), fmt.Errorf("%s: not reached after %s: %s", what, limit, detail)
		}
		<-tick.C
	}
}
