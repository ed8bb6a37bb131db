package netfilter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"

	"github.com/vishvananda/netns"

	"github.com/kipvs/kipvs/internal/kerr"
	"github.com/kipvs/kipvs/internal/netnsutil"
)

// Runner runs a command to completion with stdin (nil: none) and returns its stdout. A failed
// command returns an *ExecError.
type Runner interface {
	Run(ctx context.Context, stdin []byte, name string, args ...string) ([]byte, error)
}

// RunnerFunc adapts a function to Runner.
type RunnerFunc func(ctx context.Context, stdin []byte, name string, args ...string) ([]byte, error)

// Run implements Runner.
func (f RunnerFunc) Run(ctx context.Context, stdin []byte, name string, args ...string) ([]byte, error) {
	return f(ctx, stdin, name, args...)
}

// NewRunner runs commands inside ns (netns.None(): the current namespace).
func NewRunner(ns netns.NsHandle) Runner { return nsRunner{ns: ns} }

type nsRunner struct{ ns netns.NsHandle }

func (r nsRunner) Run(ctx context.Context, stdin []byte, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := netnsutil.Run(r.ns, cmd); err != nil {
		e := &ExecError{Cmd: strings.Join(append([]string{name}, args...), " "), ExitCode: -1, Stderr: strings.TrimSpace(stderr.String()), Err: err}
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			e.ExitCode = exit.ExitCode()
		}
		return stdout.Bytes(), e
	}
	return stdout.Bytes(), nil
}

// ExecError is a command that failed: it did not start (Err wraps exec.ErrNotFound when the
// binary is missing), or it exited non-zero.
type ExecError struct {
	Cmd      string
	ExitCode int // -1: did not start or was killed
	Stderr   string
	Err      error
}

func (e *ExecError) Error() string {
	if e.Stderr == "" {
		return fmt.Sprintf("%s: %v", e.Cmd, e.Err)
	}
	return fmt.Sprintf("%s: %v: %s", e.Cmd, e.Err, e.Stderr)
}

func (e *ExecError) Unwrap() error { return e.Err }

// binaries reads and writes tables with the iptables-save/-restore binaries of one backend.
type binaries struct {
	runner     Runner
	saveBin    string
	restoreBin string
}

// Save reads every table at once: one process per read, and iptables-legacy-save without -t
// does not create tables that do not exist.
func (b *binaries) Save(ctx context.Context) ([]byte, error) {
	return b.runner.Run(ctx, nil, b.saveBin, "-c")
}

// Restore: --noflush keeps everything the payload does not name; --counters applies the
// [pkts:bytes] carried over for unchanged rules; -w waits up to 5 s for the xtables lock (the
// legacy backend; nft accepts and ignores it).
func (b *binaries) Restore(ctx context.Context, payload string) error {
	_, err := b.runner.Run(ctx, []byte(payload), b.restoreBin, "--noflush", "--counters", "-w", "5")
	if err != nil {
		return classifyRestore(payload, err)
	}
	return nil
}

// RestoreError is a payload iptables-restore (or the fake) rejected. Line is the payload line
// that failed (1-based; 0 when the tool did not say) and Text that line.
type RestoreError struct {
	Line int
	Text string
	Err  error
}

func (e *RestoreError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("restore failed at line %d %q: %v", e.Line, e.Text, e.Err)
	}
	return fmt.Sprintf("restore failed: %v", e.Err)
}

func (e *RestoreError) Unwrap() error { return e.Err }

var lineRe = regexp.MustCompile(`line:? (\d+)`)

// classifyRestore maps an iptables-restore failure to a *RestoreError wrapping the kerr type and
// the *ExecError. The nft backend says what went wrong ("Chain 'X' does not exist", "CHAIN_DEL
// failed (Device or resource busy)"); the legacy backend often says only "line N failed", so
// then the failing operation decides: -X of a chain kipvs just flushed fails because a foreign
// rule still references it (busy), -D because the rule is gone (not found).
func classifyRestore(payload string, err error) error {
	var ee *ExecError
	if !errors.As(err, &ee) || ee.ExitCode < 0 {
		return err
	}
	msg := ee.Stderr
	re := &RestoreError{}
	if m := lineRe.FindStringSubmatch(msg); m != nil {
		if n, convErr := strconv.Atoi(m[1]); convErr == nil {
			lines := strings.Split(payload, "\n")
			if n >= 1 && n <= len(lines) {
				re.Line, re.Text = n, lines[n-1]
			}
		}
	}
	var kind error
	switch {
	case containsAny(msg, "Device or resource busy", "Too many links", "Directory not empty", "xtables lock"):
		kind = kerr.ErrBusy
	case containsAny(msg, "does not exist", "doesn't exist", "No such file or directory", "No chain/target/match by that name",
		"Bad rule (does a matching rule exist"):
		kind = kerr.ErrNotFound
	case containsAny(msg, "File exists", "already exists"):
		kind = kerr.ErrExists
	case strings.HasPrefix(re.Text, "-X "):
		kind = kerr.ErrBusy
	case strings.HasPrefix(re.Text, "-D "):
		kind = kerr.ErrNotFound
	default:
		kind = kerr.ErrInvalid
	}
	re.Err = fmt.Errorf("%w: %w", kind, err)
	return re
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
