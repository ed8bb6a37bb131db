// Package ipvs is kipvs's adapter for the kernel's IP Virtual Server table: virtual
// services (TCP, UDP, SCTP over IPv4 and IPv6, and firewall-mark services, which kipvs
// only reads), their destinations, counters and rates, IPVS info and timeouts.
//
// # Implementation
//
// The Client speaks the IPVS generic netlink family itself on one socket per instance,
// opened in the namespace given to New and reused for every call; a mutex serializes
// calls. It does not use github.com/moby/ipvs: that library decodes only the 32-bit
// counters, has no IPVS_CMD_GET_INFO, opens its sockets its own way and sends one request
// per sendmsg, and kipvs needed its own dump parsing and batching anyway. Requests are
// appended to the send buffer as bytes (appendService, appendDestination): a first sync at
// 50,000 Services sends a quarter of a million of them, and the attribute trees of
// github.com/vishvananda/netlink/nl cost 44 allocations each (the tests keep them as the
// oracle of the encoding); parsing is local (walkAttrs) so that a malformed reply becomes
// an error, not a panic. Counters come from the 64-bit stats
// attributes (IPVS_SVC_ATTR_STATS64, IPVS_DEST_ATTR_STATS64), falling back to the 32-bit
// ones on kernels that lack them.
//
// # Batching
//
// Apply packs many IPVS commands into one sendmsg. The kernel's generic netlink receive
// path processes every message of a datagram in order, synchronously, and does not stop
// at a failing one; it acknowledges a message when it fails or when it asks for an ack.
// So only the last message of a chunk carries NLM_F_ACK: its ack (or error) ends the
// chunk, and every error ack that arrives before it names a failed op by its sequence
// number. Chunks are bounded by the socket buffers (raised to 4 MiB with the FORCE
// options when the process has CAP_NET_ADMIN): the send buffer bounds the datagram, and
// the receive buffer must hold an error ack for every op of the chunk, since the kernel
// drops acks that do not fit (reported as ENOBUFS; the outcome of the ops of that chunk
// is then reported as unknown). Acks are small because the socket sets NETLINK_CAP_ACK.
//
// # Errors
//
// Every error names the operation and object and wraps both a kerr type and the
// kernel's errno: adding an existing service or destination is kerr.ErrExists (EEXIST);
// a missing service is kerr.ErrNotFound (ESRCH), a missing destination kerr.ErrNotFound
// (ENOENT), an unknown scheduler or persistence engine kerr.ErrNotFound (ENOENT: the
// kernel finds no ip_vs_<name> module); a negative weight or a lower threshold above the
// upper one kerr.ErrInvalid (ERANGE). Requests this package can tell are malformed are
// refused before reaching the kernel with kerr.ErrInvalid and EINVAL.
//
// # Kernel behaviour worth knowing
//
//   - The kernel keeps a destination's port as given for every forwarding method;
//     ipvsadm, not the kernel, rewrites the port of Route and Tunnel destinations.
//   - An IPv4 destination must be unicast in the namespace's routing: in a namespace
//     whose loopback is down, every IPv4 destination is refused with EINVAL.
//   - An IPv6 service needs a persistence netmask between 1 and 128; this package sends
//     128 when Netmask is zero.
//   - A destination dump of a missing service is empty, not an error (Destinations checks).
//   - ipvsadm sorts with `(int)(ntohl(a) - ntohl(b))`, which is not a total order for
//     addresses more than 2^31 apart; Dump sorts numerically instead (CompareServiceKeys),
//     so a test comparing with ipvsadm must re-sort ipvsadm's lines.
//
// # Dump
//
// Dump (real and fake alike) renders the table as `ipvsadm -Sn` lines, so one
// golden file checks both implementations and a kernel test can compare it with ipvsadm.
// SaveService and SaveDestination write those lines, for Dump (FormatDump: thresholds
// kept, numeric order, netip's address text) and for `kipvs status -S` (package ipvsadm:
// ipvsadm's order and glibc's address text, byte for byte).
package ipvs
