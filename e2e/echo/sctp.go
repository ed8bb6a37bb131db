package main

import (
	"errors"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"
)

// listenSCTP opens a one-to-one style SCTP socket (IPv4 and IPv6) on port, listening.
func listenSCTP(port int) (int, error) {
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, unix.IPPROTO_SCTP)
	if err != nil {
		return -1, fmt.Errorf("SCTP socket: %w", err)
	}
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 0); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("SCTP socket: IPV6_V6ONLY: %w", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("SCTP socket: SO_REUSEADDR: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet6{Port: port}); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("SCTP bind to port %d: %w", port, err)
	}
	if err := unix.Listen(fd, 64); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("SCTP listen on port %d: %w", port, err)
	}
	return fd, nil
}

// serveSCTP accepts associations on the listening socket fd forever and answers each
// one's first message with "NAME ADDR:PORT\n" (the peer as this end sees it), then
// shuts the association down.
func serveSCTP(fd int, name string) error {
	for {
		nfd, sa, err := unix.Accept4(fd, unix.SOCK_CLOEXEC)
		switch {
		case errors.Is(err, unix.EINTR), errors.Is(err, unix.ECONNABORTED):
			continue
		case err != nil:
			return fmt.Errorf("SCTP accept: %w", err)
		}
		go answerSCTP(nfd, peerString(sa), name)
	}
}

func answerSCTP(fd int, peer, name string) {
	defer unix.Close(fd)
	buf := make([]byte, 2048)
	for {
		_, err := unix.Read(fd, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return
		}
		break
	}
	msg := []byte(name + " " + peer + "\n")
	for {
		if _, err := unix.Write(fd, msg); !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

func peerString(sa unix.Sockaddr) string {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port)).String()
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(a.Addr).Unmap(), uint16(a.Port)).String()
	}
	return fmt.Sprintf("%v", sa)
}
