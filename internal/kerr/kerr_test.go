package kerr

import (
	"errors"
	"fmt"
	"syscall"
	"testing"
)

func TestErrno(t *testing.T) {
	for _, tc := range []struct {
		in   error
		kind error
	}{
		{syscall.ENOENT, ErrNotFound},
		{syscall.ESRCH, ErrNotFound},
		{fmt.Errorf("netlink: %w", syscall.EEXIST), ErrExists},
		{syscall.EINVAL, ErrInvalid},
		{syscall.EBUSY, ErrBusy},
	} {
		err := Errno("op", tc.in)
		if !errors.Is(err, tc.kind) {
			t.Errorf("Errno(%v) = %v, want it to match %v", tc.in, err, tc.kind)
		}
		var errno syscall.Errno
		if !errors.As(err, &errno) {
			t.Errorf("Errno(%v) lost the errno", tc.in)
		}
	}
	if err := Errno("op", syscall.EPERM); IsNotFound(err) || IsExists(err) || IsInvalid(err) || IsBusy(err) {
		t.Errorf("EPERM classified as %v", err)
	}
	if Errno("op", nil) != nil {
		t.Error("Errno(nil) != nil")
	}
	if got := Errno("add set X", syscall.EEXIST).Error(); got != "add set X: already exists: file exists" {
		t.Errorf("message %q", got)
	}
}
