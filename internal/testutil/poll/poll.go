package poll

import (
	"fmt"
	"testing"
	"time"
)

// MaxInterval is the longest pause between two checks.
const MaxInterval = 100 * time.Millisecond

// firstInterval is the pause after the first check.
const firstInterval = time.Millisecond

// Until checks cond until it reports done and returns how long that took; when limit passes
// first it fails the test with what and cond's last detail. cond may call t.Fatal.
func Until(t testing.TB, limit time.Duration, what string, cond func() (done bool, detail string)) time.Duration {
	t.Helper()
	took, err := Wait(limit, what, cond)
	if err != nil {
		t.Fatal(err)
	}
	return took
}

// Wait is Until returning an error instead of failing a test, for goroutines other than the
// test's and for code that is not a test.
func Wait(limit time.Duration, what string, cond func() (done bool, detail string)) (time.Duration, error) {
	start := time.Now()
	pause := firstInterval
	for {
		done, detail := cond()
		if done {
			return time.Since(start), nil
		}
		if time.Since(start) >= limit {
			if detail != "" {
				detail = ": " + detail
			}
			return time.Since(start), fmt.Errorf("%s: not reached after %s%s", what, limit, detail)
		}
		time.Sleep(pause) // polling state we cannot be notified of, with a deadline
		pause = min(2*pause, MaxInterval)
	}
}
