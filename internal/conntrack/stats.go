package conntrack

import (
	"errors"

	"github.com/kipvs/kipvs/internal/kerr"
)

// Count returns how many flows the table holds and its limit (nf_conntrack_max; 0 on
// kernels before 4.18), with one ctnetlink statistics request instead of a dump, so it is
// cheap on a full table. It also tells whether ctnetlink is reachable at all.
func (c *Conntrack) Count() (entries, limit uint32, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil {
		return 0, 0, errors.New("conntrack: closed")
	}
	s, err := c.conn.StatsGlobal()
	if err != nil {
		return 0, 0, kerr.Errno("conntrack: read table statistics", err)
	}
	return s.Entries, s.MaxEntries, nil
}
