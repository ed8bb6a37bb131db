package dummyif

import "net/netip"

// AddrBatch is addrBatch, for the external kernel tests.
const AddrBatch = addrBatch

// AddBatch is d.addBatch: one message of adds, without EnsureAddresses's fallback.
func AddBatch(d *Dummy, addrs []netip.Addr, idx []int) []int { return d.addBatch(addrs, idx) }
