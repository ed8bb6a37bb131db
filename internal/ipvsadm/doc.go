// Package ipvsadm is `kipvs status` (alias `kipvs ipvsadm`): an ipvsadm-compatible view of
// the IPVS table read through kipvs's own netlink code (internal/ipvs), with no ipvsadm
// binary. It parses ipvsadm's listing options (Parse), sorts as ipvsadm does, and renders
// byte for byte what `ipvsadm -n` 1.31 prints for -L/-l (plain, --stats, --rate, --exact,
// --thresholds, --persistent-conn, --tun-info, --nosort), -S, --timeout, -c and the
// service filters -t/-u/--sctp-service/-f. Names are never resolved: the output is always
// the numeric one, with or without -n.
//
// Facts from ipvsadm 1.31's source that the byte-identical output depends on:
//
//   - Sorting: qsort with comparators that subtract unsigned values into a C int, so
//     addresses more than 2^31 apart compare "backwards" and the comparator is not
//     transitive; the result depends on glibc's algorithm and on the kernel's dump order.
//     sort.go reproduces glibc 2.36's merge sort and the comparators; the kernel order
//     comes from ipvs.Client.TableKernelOrder.
//   - libipvs parses a destination's 64-bit stats attribute with its 32-bit parser, so
//     every destination counter but the byte counts is printed modulo 2^32 (services are
//     parsed correctly). The JSON output carries the full values.
//   - The connection listing (-c) comes from /proc/net/ip_vs_conn: IPVS's generic netlink
//     family has no command that dumps connections.
//
// The kipvs extras are separate from the compatible modes: -o json (a stable schema, see
// JSONTable) and --services, which annotates each virtual server with the Kubernetes
// Service ports the running daemon programmed it for.
package ipvsadm
