package ipvs

import (
	"context"
	"fmt"

	"github.com/kipvs/kipvs/internal/kerr"
)

// Reads in the kernel's own order, for `kipvs status`: ipvsadm sorts what the kernel dumps
// with glibc's merge sort and a comparator that is not a total order, so its output depends
// on the order the kernel lists services and destinations in. These methods return that
// order unchanged (services as the kernel's hash tables list them, destinations as each
// service's list holds them); Table and Destinations sort instead.

// TableKernelOrder is Table without sorting: every service with its destinations, in the
// order of the kernel's dumps.
func (cl *Client) TableKernelOrder() ([]Entry, error) {
	return cl.tableKernelOrder(context.Background())
}

// tableKernelOrder is TableKernelOrder, given up between two services' destination dumps
// once ctx ends (with ctx's error).
func (cl *Client) tableKernelOrder(ctx context.Context) ([]Entry, error) {
	var t []Entry
	err := cl.with(func(c *conn) error {
		svcs, err := c.services()
		if err != nil {
			return err
		}
		t = make([]Entry, len(svcs))
		for i, s := range svcs {
			if err := ctx.Err(); err != nil {
				return err
			}
			t[i].Service = s
			if t[i].Destinations, err = c.destinations(s.ServiceKey); err != nil {
				return fmt.Errorf("destinations of %s: %w", s.ServiceKey, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, kerr.Errno("ipvs: read table", err)
	}
	return t, nil
}

// EntryKernelOrder returns one service (IPVS_CMD_GET_SERVICE, as `ipvsadm -L -t` asks for
// it) with its destinations in the kernel's order; kerr.ErrNotFound (ESRCH) if the service
// does not exist.
func (cl *Client) EntryKernelOrder(k ServiceKey) (Entry, error) {
	k, err := k.Normalize()
	if err != nil {
		return Entry{}, err
	}
	var e Entry
	err = cl.with(func(c *conn) error {
		svc, err := c.service(k)
		if err != nil {
			return err
		}
		e.Service = svc
		e.Destinations, err = c.destinations(k)
		return err
	})
	if err != nil {
		return Entry{}, kerr.Errno("ipvs: read service "+k.String(), err)
	}
	return e, nil
}
