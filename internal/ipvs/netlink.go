package ipvs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/kipvs/kipvs/internal/kerr"
	"github.com/kipvs/kipvs/internal/netnsutil"
)

// Generic netlink and IPVS wire constants (linux/genetlink.h, linux/ip_vs.h).
const (
	genlIDCtrl           = 0x10
	genlCtrlCmdGetFamily = 3
	genlCtrlAttrFamilyID = 1
	genlCtrlAttrName     = 2

	ipvsGenlName    = "IPVS"
	ipvsGenlVersion = 1

	cmdNewService = 1
	cmdSetService = 2
	cmdDelService = 3
	cmdGetService = 4
	cmdNewDest    = 5
	cmdSetDest    = 6
	cmdDelDest    = 7
	cmdGetDest    = 8
	cmdSetConfig  = 12
	cmdGetConfig  = 13
	cmdGetInfo    = 15
	cmdFlush      = 17

	cmdAttrService       = 1
	cmdAttrDest          = 2
	cmdAttrTimeoutTCP    = 4
	cmdAttrTimeoutTCPFin = 5
	cmdAttrTimeoutUDP    = 6

	svcAttrAF        = 1
	svcAttrProtocol  = 2
	svcAttrAddr      = 3
	svcAttrPort      = 4
	svcAttrFWMark    = 5
	svcAttrSchedName = 6
	svcAttrFlags     = 7
	svcAttrTimeout   = 8
	svcAttrNetmask   = 9
	svcAttrStats     = 10
	svcAttrPEName    = 11
	svcAttrStats64   = 12

	destAttrAddr         = 1
	destAttrPort         = 2
	destAttrFwdMethod    = 3
	destAttrWeight       = 4
	destAttrUThresh      = 5
	destAttrLThresh      = 6
	destAttrActiveConns  = 7
	destAttrInactConns   = 8
	destAttrPersistConns = 9
	destAttrStats        = 10
	destAttrAddrFamily   = 11
	destAttrStats64      = 12
	destAttrTunType      = 13
	destAttrTunPort      = 14
	destAttrTunFlags     = 15

	statsAttrConns    = 1
	statsAttrInPkts   = 2
	statsAttrOutPkts  = 3
	statsAttrInBytes  = 4
	statsAttrOutBytes = 5
	statsAttrCPS      = 6
	statsAttrInPPS    = 7
	statsAttrOutPPS   = 8
	statsAttrInBPS    = 9
	statsAttrOutBPS   = 10

	infoAttrVersion     = 1
	infoAttrConnTabSize = 2

	nlaFNested   = 1 << 15
	nlaTypeMask  = 1<<14 - 1
	nlmsgerrMsg  = 1 // NLMSGERR_ATTR_MSG
	genlHdrLen   = 4
	recvBufSize  = 64 << 10
	sockBufBytes = 4 << 20
	// ackBudget is what one queued error acknowledgement may cost in the receive buffer
	// (skb truesize); it bounds the ops per sendmsg so that even an all-failing chunk
	// cannot overflow the socket.
	ackBudget = 2048
	// maxChunkBytes bounds one sendmsg.
	maxChunkBytes = 512 << 10
)

// conn is one generic netlink socket bound to the IPVS family in one network namespace.
// It is not safe for concurrent use; Client serializes calls.
type conn struct {
	file    *os.File
	rc      syscall.RawConn
	family  uint16
	seq     uint32
	timeout time.Duration
	rbuf    []byte
	// msgs, dests and svcs are reused by every receive and dump (a periodic full sync makes
	// one destination dump per virtual server): see parseMessages, destinations, services.
	msgs  []syscall.NetlinkMessage
	dests []Destination
	svcs  []Service
	// chunk limits for batches, derived from the socket buffer sizes
	maxOps   int
	maxBytes int
	// sends counts sendmsg calls (for tests and measurements).
	sends int
}

// dial opens the socket inside ns (netns.None(): the current namespace) and resolves the
// IPVS family.
func dial(ns netns.NsHandle, timeout time.Duration) (*conn, error) {
	var fd int
	err := netnsutil.Do(ns, func() error {
		var err error
		fd, err = unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_GENERIC)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("ipvs: open generic netlink socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("ipvs: bind generic netlink socket: %w", err)
	}
	// Small error acks (no echo of the request) with the kernel's message, if it has one.
	// Both options are best effort: older kernels lack them and still work.
	_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_CAP_ACK, 1)
	_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_EXT_ACK, 1)
	rcv := setBuf(fd, unix.SO_RCVBUFFORCE, unix.SO_RCVBUF)
	snd := setBuf(fd, unix.SO_SNDBUFFORCE, unix.SO_SNDBUF)

	f := os.NewFile(uintptr(fd), "ipvs-genetlink")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("ipvs: generic netlink socket: %w", err)
	}
	c := &conn{file: f, rc: rc, timeout: timeout, rbuf: make([]byte, recvBufSize)}
	c.maxOps = max(1, min(1024, rcv/ackBudget))
	c.maxBytes = max(4096, min(maxChunkBytes, snd-1024))
	if err := c.resolveFamily(); err != nil {
		f.Close()
		return nil, err
	}
	return c, nil
}

// setBuf raises a socket buffer to sockBufBytes (the FORCE variant needs CAP_NET_ADMIN)
// and returns the size the kernel accounts with.
func setBuf(fd, force, plain int) int {
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, force, sockBufBytes) != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, plain, sockBufBytes)
	}
	n, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, plain)
	if err != nil {
		return 128 << 10
	}
	return n
}

func (c *conn) close() error { return c.file.Close() }

func (c *conn) resolveFamily() error {
	c.family = genlIDCtrl
	attrs := appendStringAttr(nil, genlCtrlAttrName, ipvsGenlName)
	var id uint16
	err := c.execute(genlCtrlCmdGetFamily, 0, attrs, func(b []byte) error {
		return walkAttrs(b, func(typ uint16, v []byte) error {
			if typ == genlCtrlAttrFamilyID && len(v) >= 2 {
				id = native.Uint16(v)
			}
			return nil
		})
	})
	if err != nil {
		return kerr.Errno("ipvs: resolve generic netlink family "+ipvsGenlName+" (is ip_vs loaded?)", err)
	}
	if id == 0 {
		return fmt.Errorf("ipvs: generic netlink family %s: no id in reply", ipvsGenlName)
	}
	c.family = id
	return nil
}

var native = binary.NativeEndian

// appendMsg appends one netlink message (header, genl header, attributes: encoded already)
// to b.
func (c *conn) appendMsg(b []byte, cmd uint8, flags uint16, seq uint32, attrs []byte) []byte {
	b, start := c.beginMsg(b, cmd, flags, seq)
	return endMsg(append(b, attrs...), start)
}

// beginMsg appends the netlink and genl headers of a message, its length left for endMsg,
// and returns where it starts.
func (c *conn) beginMsg(b []byte, cmd uint8, flags uint16, seq uint32) ([]byte, int) {
	start := len(b)
	b = native.AppendUint32(b, 0)
	b = native.AppendUint16(b, c.family)
	b = native.AppendUint16(b, flags|unix.NLM_F_REQUEST)
	b = native.AppendUint32(b, seq)
	b = native.AppendUint32(b, 0)
	return append(b, cmd, ipvsGenlVersion, 0, 0), start
}

// endMsg sets the length of the message that starts at start.
func endMsg(b []byte, start int) []byte {
	native.PutUint32(b[start:], uint32(len(b)-start))
	return b
}

// reserveSeq returns the first of n consecutive, non-zero sequence numbers.
func (c *conn) reserveSeq(n int) uint32 {
	if c.seq > ^uint32(0)-uint32(n) {
		c.seq = 0
	}
	first := c.seq + 1
	c.seq += uint32(n)
	return first
}

func (c *conn) send(b []byte) error {
	if err := c.file.SetWriteDeadline(time.Now().Add(c.timeout)); err != nil {
		return err
	}
	var serr error
	err := c.rc.Write(func(fd uintptr) bool {
		serr = unix.Sendto(int(fd), b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
		return serr != unix.EAGAIN
	})
	c.sends++
	if serr != nil {
		return serr
	}
	return deadlineErr(err)
}

// recv reads one datagram. With wait false it returns EAGAIN instead of blocking.
func (c *conn) recv(wait bool) ([]syscall.NetlinkMessage, error) {
	if err := c.file.SetReadDeadline(time.Now().Add(c.timeout)); err != nil {
		return nil, err
	}
	var (
		n, flags int
		rerr     error
	)
	err := c.rc.Read(func(fd uintptr) bool {
		n, _, flags, _, rerr = unix.Recvmsg(int(fd), c.rbuf, nil, unix.MSG_DONTWAIT)
		return !wait || rerr != unix.EAGAIN
	})
	if rerr != nil {
		return nil, rerr
	}
	if err != nil {
		return nil, deadlineErr(err)
	}
	if flags&unix.MSG_TRUNC != 0 {
		return nil, fmt.Errorf("netlink message truncated (%d bytes read)", n)
	}
	c.msgs, err = parseMessages(c.msgs[:0], c.rbuf[:n])
	return c.msgs, err
}

// parseMessages appends the netlink messages in b to dst, as syscall.ParseNetlinkMessage
// returns them (Data aliases b) but into a slice the caller reuses.
func parseMessages(dst []syscall.NetlinkMessage, b []byte) ([]syscall.NetlinkMessage, error) {
	for len(b) >= unix.NLMSG_HDRLEN {
		h := syscall.NlMsghdr{
			Len: native.Uint32(b[0:4]), Type: native.Uint16(b[4:6]), Flags: native.Uint16(b[6:8]),
			Seq: native.Uint32(b[8:12]), Pid: native.Uint32(b[12:16]),
		}
		l := int(h.Len)
		if l < unix.NLMSG_HDRLEN || nlmAlign(l) > len(b) {
			return dst[:0], syscall.EINVAL
		}
		dst = append(dst, syscall.NetlinkMessage{Header: h, Data: b[unix.NLMSG_HDRLEN:l]})
		b = b[nlmAlign(l):]
	}
	return dst, nil
}

func deadlineErr(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("no answer from the kernel: %w", syscall.ETIMEDOUT)
	}
	return err
}

// execute sends one request and feeds the attribute payload of every reply message to fn
// (which may be nil). flags may add NLM_F_DUMP; other requests are acked.
func (c *conn) execute(cmd uint8, flags uint16, attrs []byte, fn func(attrs []byte) error) error {
	dump := flags&unix.NLM_F_DUMP != 0
	if !dump {
		flags |= unix.NLM_F_ACK
	}
	seq := c.reserveSeq(1)
	if err := c.send(c.appendMsg(nil, cmd, flags, seq, attrs)); err != nil {
		return err
	}
	var fnErr error
	for {
		msgs, err := c.recv(true)
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if m.Header.Seq != seq {
				continue // a late answer to an earlier request that timed out
			}
			switch m.Header.Type {
			case unix.NLMSG_ERROR:
				if err := ackError(m); err != nil {
					return err
				}
				return fnErr
			case unix.NLMSG_DONE:
				if dump {
					if len(m.Data) >= 4 {
						if code := int32(native.Uint32(m.Data)); code < 0 {
							return syscall.Errno(-code)
						}
					}
					return fnErr
				}
			case unix.NLMSG_NOOP, unix.NLMSG_OVERRUN:
			default:
				if fn != nil && fnErr == nil && len(m.Data) >= genlHdrLen {
					fnErr = fn(m.Data[genlHdrLen:])
				}
			}
		}
	}
}

// ackError decodes an NLMSG_ERROR message: nil for a positive ack, else the errno, with the
// kernel's extended-ack text if there is one.
func ackError(m syscall.NetlinkMessage) error {
	if len(m.Data) < 4 {
		return fmt.Errorf("short netlink error message: %w", syscall.EBADMSG)
	}
	code := int32(native.Uint32(m.Data))
	if code == 0 {
		return nil
	}
	errno := syscall.Errno(-code)
	if m.Header.Flags&unix.NLM_F_ACK_TLVS == 0 {
		return errno
	}
	// Skip the echoed request: its header only when capped, else the whole message.
	off := 4 + unix.NLMSG_HDRLEN
	if m.Header.Flags&unix.NLM_F_CAPPED == 0 && len(m.Data) >= off {
		off = 4 + nlmAlign(int(native.Uint32(m.Data[4:8])))
	}
	if off > len(m.Data) {
		return errno
	}
	var msg string
	_ = walkAttrs(m.Data[off:], func(typ uint16, v []byte) error {
		if typ == nlmsgerrMsg {
			msg = cString(v)
		}
		return nil
	})
	if msg == "" {
		return errno
	}
	return fmt.Errorf("%w (%s)", errno, msg)
}

// batch sends msgs (complete requests whose sequence numbers are seq0, seq0+1, ...) in
// one sendmsg. Only the last carries NLM_F_ACK: the kernel processes the messages in
// order and acks failures anyway, so the last ack (or error) ends the batch. It returns
// one error per message; a transport failure is reported for every message whose
// outcome is unknown.
func (c *conn) batch(buf []byte, seq0 uint32, n int) []error {
	errs := make([]error, n)
	if err := c.send(buf); err != nil {
		for i := range errs {
			errs[i] = fmt.Errorf("batch not sent: %w", err)
		}
		return errs
	}
	last := seq0 + uint32(n) - 1
	for {
		msgs, err := c.recv(true)
		if err != nil {
			c.lostAcks(errs, seq0, last, err)
			return errs
		}
		for _, m := range msgs {
			if m.Header.Type != unix.NLMSG_ERROR || m.Header.Seq-seq0 >= uint32(n) {
				continue
			}
			errs[m.Header.Seq-seq0] = ackError(m)
			if m.Header.Seq == last {
				return errs
			}
		}
	}
}

// lostAcks handles a receive error in the middle of a batch (ENOBUFS: the kernel dropped
// acknowledgements because the receive buffer was full; or a timeout). Everything the
// kernel will send is already queued, so it drains the socket without waiting and marks
// the ops without a known failure as unknown.
func (c *conn) lostAcks(errs []error, seq0, last uint32, cause error) {
	for {
		msgs, err := c.recv(false)
		if err != nil {
			break
		}
		for _, m := range msgs {
			if m.Header.Type == unix.NLMSG_ERROR && m.Header.Seq-seq0 < uint32(len(errs)) {
				if e := ackError(m); e != nil {
					errs[m.Header.Seq-seq0] = e
				}
			}
		}
	}
	for i := range errs {
		if errs[i] == nil {
			errs[i] = fmt.Errorf("outcome unknown, acknowledgements lost: %w", cause)
		}
	}
}

func nlmAlign(n int) int { return (n + unix.NLMSG_ALIGNTO - 1) &^ (unix.NLMSG_ALIGNTO - 1) }

// walkAttrs calls fn for every attribute in b (type without the nested/byte-order flags).
// It stops at the first malformed attribute.
func walkAttrs(b []byte, fn func(typ uint16, v []byte) error) error {
	for len(b) >= 4 {
		l := int(native.Uint16(b[0:2]))
		typ := native.Uint16(b[2:4]) & nlaTypeMask
		if l < 4 || l > len(b) {
			return fmt.Errorf("malformed netlink attribute (type %d, length %d, %d bytes left): %w", typ, l, len(b), syscall.EBADMSG)
		}
		if err := fn(typ, b[4:l]); err != nil {
			return err
		}
		l = (l + unix.NLA_ALIGNTO - 1) &^ (unix.NLA_ALIGNTO - 1)
		if l >= len(b) {
			return nil
		}
		b = b[l:]
	}
	return nil
}

func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
