package poll

import (
	"strconv"
	"testing"
	"time"
)

// Wait returns once the condition holds, having checked it until then and no longer.
func TestWaitReturnsWhenDone(t *testing.T) {
	calls := 0
	took, err := Wait(time.Minute, "three calls", func() (bool, string) {
		calls++
		return calls == 3, strconv.Itoa(calls)
	})
	if err != nil || calls != 3 {
		t.Fatalf("Wait = %v after %d calls, want nil after 3", err, calls)
	}
	if took <= 0 || took >= time.Minute {
		t.Errorf("took %v", took)
	}
}

// When the limit passes, the error names what was awaited, the limit and the last detail.
func TestWaitLimit(t *testing.T) {
	calls := 0
	_, err := Wait(30*time.Millisecond, "never", func() (bool, string) {
		calls++
		return false, "call " + strconv.Itoa(calls)
	})
	if err == nil {
		t.Fatal("Wait = nil for a condition that never holds")
	}
	if want := "never: not reached after 30ms: call " + strconv.Itoa(calls); err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	if calls < 2 {
		t.Errorf("%d calls in 30 ms, want the condition checked again before the limit", calls)
	}
}
