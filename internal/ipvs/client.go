package ipvs

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/kipvs/kipvs/internal/kerr"
)

// Client is the kernel implementation of Interface: one generic netlink socket in one
// network namespace, used for every call. It is safe for concurrent use; calls are
// serialized.
type Client struct {
	mu   sync.Mutex
	conn *conn // nil once closed
}

var _ Interface = (*Client)(nil)

// Option configures New.
type Option func(*options)

type options struct {
	timeout time.Duration
	// maxBatch caps the ops per sendmsg in Apply (0: as many as the socket buffers allow,
	// at most 1024); the kernel tests set it.
	maxBatch int
}

// WithTimeout bounds how long one kernel round trip may take (default 30 s).
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// New opens a client bound to the network namespace ns; netns.None() means the current
// namespace. The handle is only used during New: the socket stays in that namespace.
// It fails (wrapping kerr.ErrNotFound) if the kernel has no IPVS generic netlink family,
// i.e. ip_vs is not loaded.
func New(ns netns.NsHandle, opts ...Option) (*Client, error) {
	o := options{timeout: 30 * time.Second}
	for _, fn := range opts {
		fn(&o)
	}
	c, err := dial(ns, o.timeout)
	if err != nil {
		return nil, err
	}
	if o.maxBatch > 0 {
		c.maxOps = min(c.maxOps, o.maxBatch)
	}
	return &Client{conn: c}, nil
}

// Close releases the socket. Further calls fail.
func (cl *Client) Close() error {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.conn == nil {
		return nil
	}
	err := cl.conn.close()
	cl.conn = nil
	return err
}

// with runs fn with the connection under the client's lock.
func (cl *Client) with(fn func(c *conn) error) error {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.conn == nil {
		return ErrClosed
	}
	return fn(cl.conn)
}

// Info implements Interface.
func (cl *Client) Info() (Info, error) {
	var info Info
	err := cl.with(func(c *conn) error {
		return c.execute(cmdGetInfo, 0, nil, func(b []byte) error {
			return walkAttrs(b, func(t uint16, v []byte) error {
				switch t {
				case infoAttrVersion:
					info.Version = u32(v)
				case infoAttrConnTabSize:
					info.ConnTableSize = u32(v)
				}
				return nil
			})
		})
	})
	return info, kerr.Errno("ipvs: get info", err)
}

// Timeouts implements Interface.
func (cl *Client) Timeouts() (Timeouts, error) {
	var t Timeouts
	err := cl.with(func(c *conn) error {
		return c.execute(cmdGetConfig, 0, nil, func(b []byte) error {
			return walkAttrs(b, func(typ uint16, v []byte) error {
				switch typ {
				case cmdAttrTimeoutTCP:
					t.TCP = u32(v)
				case cmdAttrTimeoutTCPFin:
					t.TCPFin = u32(v)
				case cmdAttrTimeoutUDP:
					t.UDP = u32(v)
				}
				return nil
			})
		})
	})
	return t, kerr.Errno("ipvs: get timeouts", err)
}

// SetTimeouts implements Interface. Zero fields are not sent, which leaves them unchanged.
func (cl *Client) SetTimeouts(t Timeouts) error {
	var attrs []byte
	for _, a := range []struct {
		typ uint16
		v   uint32
	}{{cmdAttrTimeoutTCP, t.TCP}, {cmdAttrTimeoutTCPFin, t.TCPFin}, {cmdAttrTimeoutUDP, t.UDP}} {
		if a.v != 0 {
			if a.v > MaxTimeout {
				return Invalidf("ipvs: set timeouts: %d s is too long (max %d)", a.v, MaxTimeout)
			}
			attrs = appendU32Attr(attrs, a.typ, a.v)
		}
	}
	if len(attrs) == 0 {
		return nil
	}
	err := cl.with(func(c *conn) error { return c.execute(cmdSetConfig, 0, attrs, nil) })
	return kerr.Errno(fmt.Sprintf("ipvs: set timeouts tcp %d tcpfin %d udp %d", t.TCP, t.TCPFin, t.UDP), err)
}

// MaxTimeout is the largest timeout the kernel accepts (INT_MAX / HZ with HZ up to 1000).
const MaxTimeout = 1<<31/1000 - 1

// Flush implements Interface.
func (cl *Client) Flush() error {
	err := cl.with(func(c *conn) error { return c.execute(cmdFlush, 0, nil, nil) })
	return kerr.Errno("ipvs: flush", err)
}

// services dumps every service, unsorted.
func (c *conn) services() ([]Service, error) {
	c.svcs = c.svcs[:0]
	err := c.execute(cmdGetService, unix.NLM_F_DUMP, nil, func(b []byte) error {
		s, err := decodeService(b)
		if err == nil {
			c.svcs = append(c.svcs, s)
		}
		return err
	})
	if err != nil || len(c.svcs) == 0 {
		return nil, err
	}
	return slices.Clone(c.svcs), nil // sized to fit, not grown by doubling
}

// destinations dumps the destinations of service k (normalized), unsorted. The kernel
// answers an empty dump for a missing service.
func (c *conn) destinations(k ServiceKey) ([]Destination, error) {
	c.dests = c.dests[:0]
	attrs := appendService(nil, Service{ServiceKey: k}, false)
	err := c.execute(cmdGetDest, unix.NLM_F_DUMP, attrs, func(b []byte) error {
		d, err := decodeDestination(b, k.Family)
		if err == nil {
			c.dests = append(c.dests, d)
		}
		return err
	})
	if err != nil {
		return []Destination{}, err
	}
	// Sized to fit (one allocation, not one per doubling); never nil.
	return append(make([]Destination, 0, len(c.dests)), c.dests...), nil
}

// service gets one service (ESRCH if missing).
func (c *conn) service(k ServiceKey) (Service, error) {
	var svc Service
	attrs := appendService(nil, Service{ServiceKey: k}, false)
	err := c.execute(cmdGetService, 0, attrs, func(b []byte) error {
		var err error
		svc, err = decodeService(b)
		return err
	})
	return svc, err
}

// Services implements Interface.
func (cl *Client) Services() ([]Service, error) {
	var svcs []Service
	err := cl.with(func(c *conn) error {
		var err error
		svcs, err = c.services()
		return err
	})
	if err != nil {
		return nil, kerr.Errno("ipvs: list services", err)
	}
	slices.SortFunc(svcs, func(a, b Service) int { return CompareServiceKeys(a.ServiceKey, b.ServiceKey) })
	return svcs, nil
}

// GetService implements Interface.
func (cl *Client) GetService(k ServiceKey) (Service, error) {
	k, err := k.Normalize()
	if err != nil {
		return Service{}, err
	}
	var svc Service
	err = cl.with(func(c *conn) error {
		var err error
		svc, err = c.service(k)
		return err
	})
	return svc, kerr.Errno("ipvs: get service "+k.String(), err)
}

// Destinations implements Interface.
func (cl *Client) Destinations(k ServiceKey) ([]Destination, error) {
	k, err := k.Normalize()
	if err != nil {
		return nil, err
	}
	var dests []Destination
	err = cl.with(func(c *conn) error {
		var err error
		if dests, err = c.destinations(k); err != nil || len(dests) > 0 {
			return err
		}
		// An empty dump does not tell a service without destinations from a missing one.
		_, err = c.service(k)
		return err
	})
	if err != nil {
		return nil, kerr.Errno("ipvs: list destinations of "+k.String(), err)
	}
	slices.SortFunc(dests, CompareDestinations)
	return dests, nil
}

// Table implements Interface: one service dump plus one destination dump per service,
// under one lock. A service deleted by someone else between the two shows no destinations.
func (cl *Client) Table() ([]Entry, error) { return cl.TableContext(context.Background()) }

// TableContext is Table, given up once ctx ends (between two services' destination dumps:
// 50,000 of them take a minute under qemu TCG, and a stopping daemon must not wait for
// them); the error then wraps ctx's.
func (cl *Client) TableContext(ctx context.Context) ([]Entry, error) {
	t, err := cl.tableKernelOrder(ctx)
	if err != nil {
		return nil, err
	}
	SortTable(t)
	return t, nil
}

// Dump implements Interface.
func (cl *Client) Dump() (string, error) {
	t, err := cl.Table()
	if err != nil {
		return "", err
	}
	return FormatDump(t), nil
}

// do runs one mutation as its own request.
func (cl *Client) do(o Op) error {
	n, err := o.Normalize()
	if err != nil {
		return fmt.Errorf("ipvs: %s: %w", o, err)
	}
	cmd, attrs := opCommand(n), appendOpAttrs(nil, n)
	err = cl.with(func(c *conn) error { return c.execute(cmd, 0, attrs, nil) })
	return kerr.Errno("ipvs: "+n.String(), err)
}

// AddService implements Interface.
func (cl *Client) AddService(s Service) error { return cl.do(AddServiceOp(s)) }

// UpdateService implements Interface.
func (cl *Client) UpdateService(s Service) error { return cl.do(UpdateServiceOp(s)) }

// DeleteService implements Interface.
func (cl *Client) DeleteService(k ServiceKey) error { return cl.do(DeleteServiceOp(k)) }

// AddDestination implements Interface.
func (cl *Client) AddDestination(k ServiceKey, d Destination) error {
	return cl.do(AddDestinationOp(k, d))
}

// UpdateDestination implements Interface.
func (cl *Client) UpdateDestination(k ServiceKey, d Destination) error {
	return cl.do(UpdateDestinationOp(k, d))
}

// DeleteDestination implements Interface.
func (cl *Client) DeleteDestination(k ServiceKey, ap netip.AddrPort) error {
	return cl.do(DeleteDestinationOp(k, ap))
}

// Apply implements Interface. Ops are packed into as few sendmsg calls as the socket
// buffers allow (see the package doc); each op's failure is reported with its index.
func (cl *Client) Apply(ops []Op) error {
	if len(ops) == 0 {
		return nil
	}
	var failed []*OpError
	err := cl.with(func(c *conn) error {
		// Ops are normalized one chunk at a time: a first sync applies a hundred thousand
		// ops, and a normalized copy of them all would double the plan's memory.
		var buf []byte
		chunk := make([]Op, 0, min(len(ops), c.maxOps)) // the chunk's normalized ops
		at := make([]int, 0, cap(chunk))                // their positions in ops
		for i := 0; i < len(ops); {
			seq0 := c.reserveSeq(c.maxOps)
			buf, chunk, at = buf[:0], chunk[:0], at[:0]
			last := 0 // offset of the chunk's last message
			for i < len(ops) && len(chunk) < c.maxOps {
				n, err := ops[i].Normalize()
				if err != nil {
					failed = append(failed, &OpError{Index: i, Op: ops[i], Err: fmt.Errorf("ipvs: %s: %w", ops[i], err)})
					i++
					continue
				}
				off := len(buf)
				var start int
				buf, start = c.beginMsg(buf, opCommand(n), 0, seq0+uint32(len(chunk)))
				buf = endMsg(appendOpAttrs(buf, n), start)
				if len(buf) > c.maxBytes && len(chunk) > 0 {
					buf = buf[:off] // ops[i] starts the next chunk
					break
				}
				last = off
				chunk = append(chunk, n)
				at = append(at, i)
				i++
			}
			if len(chunk) == 0 {
				continue // the rest were invalid
			}
			setAck(buf, last)
			for j, e := range c.batch(buf, seq0, len(chunk)) {
				if e != nil {
					failed = append(failed, &OpError{Index: at[j], Op: ops[at[j]], Err: kerr.Errno("ipvs: "+chunk[j].String(), e)})
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	slices.SortFunc(failed, func(a, b *OpError) int { return cmp.Compare(a.Index, b.Index) })
	return NewBatchError(len(ops), failed)
}

// setAck sets NLM_F_ACK on the message starting at off in buf.
func setAck(buf []byte, off int) {
	h := buf[off+6 : off+8]
	native.PutUint16(h, native.Uint16(h)|unix.NLM_F_ACK)
}
