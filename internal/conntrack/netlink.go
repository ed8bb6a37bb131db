package conntrack

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"syscall"

	"github.com/mdlayher/netlink"
	ct "github.com/ti-mo/conntrack"
	"github.com/vishvananda/netns"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/kerr"
)

// Conntrack is the real implementation: one ctnetlink socket bound to a network namespace,
// reused for every call. It is safe for concurrent use (calls are serialised).
type Conntrack struct {
	mu   sync.Mutex
	conn *ct.Conn
}

var _ Interface = (*Conntrack)(nil)

// New opens a ctnetlink socket in ns (netns.None(): the namespace of the calling thread).
// Listing needs no conntrack module beyond nf_conntrack_netlink; a namespace where nothing
// has enabled connection tracking simply has no flows.
func New(ns netns.NsHandle) (*Conntrack, error) {
	cfg := &netlink.Config{}
	if ns.IsOpen() {
		cfg.NetNS = int(ns)
	}
	c, err := ct.Dial(cfg)
	if err != nil {
		return nil, fmt.Errorf("conntrack: open netlink socket in %s: %w", ns, err)
	}
	return &Conntrack{conn: c}, nil
}

// Close releases the socket.
func (c *Conntrack) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil {
		return nil
	}
	err := c.conn.Close()
	c.conn = nil
	return err
}

// dump returns the kernel's flows, with their kernel ids. Callers hold c.mu.
func (c *Conntrack) dump() ([]ct.Flow, error) {
	if c.conn == nil {
		return nil, errors.New("conntrack: closed")
	}
	fs, err := c.conn.Dump(nil)
	if err != nil {
		return nil, kerr.Errno("conntrack: dump flows", err)
	}
	return fs, nil
}

// List implements Interface.
func (c *Conntrack) List() ([]Flow, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	kfs, err := c.dump()
	if err != nil {
		return nil, err
	}
	fs := make([]Flow, len(kfs))
	for i, kf := range kfs {
		fs[i] = fromKernel(kf)
	}
	SortFlows(fs)
	return fs, nil
}

// Delete implements Interface.
func (c *Conntrack) Delete(filters ...Filter) (int, error) {
	if err := ValidateFilters(filters); err != nil {
		return 0, err
	}
	if len(filters) == 0 {
		return 0, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	kfs, err := c.dump()
	if err != nil {
		return 0, fmt.Errorf("delete flows: %w", err)
	}
	n := 0
	for _, kf := range kfs {
		fl := fromKernel(kf)
		f, ok := MatchAny(filters, fl)
		if !ok {
			continue
		}
		// The original tuple and zone find the flow, the id makes sure it is still the
		// one dumped and not a new flow with the same tuple. The reply tuple is not
		// needed by the kernel but the library takes the message's family from it
		// (IPv6 only if both tuples are IPv6).
		var del ct.Flow
		del.TupleOrig = kf.TupleOrig
		del.TupleReply = kf.TupleReply
		del.Zone = kf.Zone
		del.ID = kf.ID
		if err := c.conn.Delete(del); err != nil {
			if errors.Is(err, syscall.ENOENT) {
				continue // expired or replaced since the dump
			}
			return n, kerr.Errno(fmt.Sprintf("delete flow %s (filter %s)", fl, f), err)
		}
		n++
	}
	return n, nil
}

// Dump implements Interface.
func (c *Conntrack) Dump() (string, error) {
	fs, err := c.List()
	if err != nil {
		return "", err
	}
	return FormatDump(fs), nil
}

func fromKernel(kf ct.Flow) Flow {
	return Flow{
		Protocol: inet.Protocol(kf.TupleOrig.Proto.Protocol),
		Orig:     tupleFromKernel(kf.TupleOrig),
		Reply:    tupleFromKernel(kf.TupleReply),
		Zone:     kf.Zone,
		Mark:     kf.Mark,
	}
}

func tupleFromKernel(t ct.Tuple) Tuple {
	return Tuple{
		Src: netip.AddrPortFrom(t.IP.SourceAddress, t.Proto.SourcePort),
		Dst: netip.AddrPortFrom(t.IP.DestinationAddress, t.Proto.DestinationPort),
	}
}
