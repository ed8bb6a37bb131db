package kerr

import (
	"errors"
	"fmt"
	"syscall"
)

var (
	// ErrNotFound: the object (service, destination, set, entry, link, address, key) does not exist.
	ErrNotFound = errors.New("not found")
	// ErrExists: the object already exists (a create/add without "exist" semantics).
	ErrExists = errors.New("already exists")
	// ErrInvalid: the kernel (or the fake, modelling it) rejects the request as malformed,
	// e.g. a member of the wrong type for a set.
	ErrInvalid = errors.New("invalid argument")
	// ErrBusy: the object is in use (e.g. destroying a set that a rule references).
	ErrBusy = errors.New("in use")
)

// IsNotFound reports whether err is, or wraps, ErrNotFound.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// IsExists reports whether err is, or wraps, ErrExists.
func IsExists(err error) bool { return errors.Is(err, ErrExists) }

// IsInvalid reports whether err is, or wraps, ErrInvalid.
func IsInvalid(err error) bool { return errors.Is(err, ErrInvalid) }

// IsBusy reports whether err is, or wraps, ErrBusy.
func IsBusy(err error) bool { return errors.Is(err, ErrBusy) }

// Errno maps a kernel errno to the typed errors above, keeping the original error in the
// chain: the result matches both errors.Is(err, kerr.ErrNotFound) and errors.Is(err, syscall.ENOENT).
// what names the operation and object, e.g. `add destination 10.0.0.1:80 to TCP 10.96.0.1:443`.
func Errno(what string, err error) error {
	if err == nil {
		return nil
	}
	var kind error
	var errno syscall.Errno
	if errors.As(err, &errno) {
		switch errno {
		case syscall.ENOENT, syscall.ESRCH, syscall.ENODEV, syscall.EADDRNOTAVAIL:
			kind = ErrNotFound
		case syscall.EEXIST:
			kind = ErrExists
		case syscall.EINVAL, syscall.ERANGE, syscall.EAFNOSUPPORT, syscall.EPROTONOSUPPORT:
			kind = ErrInvalid
		case syscall.EBUSY:
			kind = ErrBusy
		}
	}
	if kind == nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return fmt.Errorf("%s: %w: %w", what, kind, err)
}
