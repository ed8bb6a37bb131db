package harness

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kipvs/kipvs/internal/netnsutil"
)

// SCTP opens an SCTP association (a one-to-one style socket) to addr, sends one message
// and returns the echo backend's answer. The socket is non-blocking and waits in Go's
// poller, so Timeout bounds the whole exchange; a timeout is reported as
// os.ErrDeadlineExceeded (IsTimeout holds for it).
func (c Client) SCTP(addr netip.AddrPort) (Answer, error) {
	var ans Answer
	err := netnsutil.Do(c.ns(), func() error {
		fam, sa := unix.AF_INET, unix.Sockaddr(&unix.SockaddrInet4{Port: int(addr.Port()), Addr: addr.Addr().As4()})
		if addr.Addr().Is6() && !addr.Addr().Is4In6() {
			fam, sa = unix.AF_INET6, &unix.SockaddrInet6{Port: int(addr.Port()), Addr: addr.Addr().As16()}
		}
		fd, err := unix.Socket(fam, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_SCTP)
		if err != nil {
			return fmt.Errorf("SCTP socket: %w", err)
		}
		f := os.NewFile(uintptr(fd), "sctp")
		defer f.Close()
		if err := f.SetDeadline(time.Now().Add(c.timeout())); err != nil {
			return err
		}
		rc, err := f.SyscallConn()
		if err != nil {
			return err
		}
		if err := unix.Connect(fd, sa); err != nil && !errors.Is(err, unix.EINPROGRESS) {
			return fmt.Errorf("connect: %w", err)
		}
		// The association is up (or has failed) when poll(2) says the socket is writable
		// (or in error). Asking the socket on every call, the first one included, matters:
		// RawConn.Write resets the poller's readiness before calling, so an association
		// that came up between connect and that reset would never be signalled again.
		var soErr error
		if err := rc.Write(func(fd uintptr) bool {
			pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
			n, err := unix.Poll(pfd, 0)
			for errors.Is(err, unix.EINTR) {
				n, err = unix.Poll(pfd, 0)
			}
			if err != nil {
				soErr = err
				return true
			}
			if n == 0 {
				return false
			}
			e, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_ERROR)
			if err == nil && e != 0 {
				err = unix.Errno(e)
			}
			soErr = err
			return true
		}); err != nil {
			return fmt.Errorf("connect: %w", err)
		}
		if soErr != nil {
			return fmt.Errorf("connect: %w", soErr)
		}
		if _, err := f.Write([]byte("e2e\n")); err != nil {
			return fmt.Errorf("send: %w", err)
		}
		buf := make([]byte, 512)
		n, err := f.Read(buf)
		if err != nil {
			return fmt.Errorf("read answer: %w", err)
		}
		ans, err = parseAnswer(string(buf[:n]))
		return err
	})
	if err != nil {
		return Answer{}, fmt.Errorf("sctp %s: %w", addr, err)
	}
	return ans, nil
}
