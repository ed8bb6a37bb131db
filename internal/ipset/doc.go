// Package ipset manages the kernel ipsets kube-proxy's IPVS mode uses (the KUBE-* sets) in one
// network namespace: create (ensure), destroy, flush, swap, add/del/test members, list, and an
// atomic Replace of a set's whole content.
//
// The real implementation (New) talks netlink (NETLINK_NETFILTER, subsystem ipset) through
// github.com/vishvananda/netlink, plus a little netlink code of its own where that library
// falls short (see Real). It never runs the ipset binary. The fake (ipsettest.NewFake)
// models the kernel's state for unit tests. Both produce the same Dump (see dump.go), so one golden file
// checks both, and NormalizeSave makes `ipset save` output comparable with it.
//
// Kernel behaviour worth knowing (checked in the kernel tests, Debian 6.1):
//   - Each member is checked against the set's type and family before it is sent. The
//     kernel itself refuses most mismatches (IPSET_ERR_PROTOCOL), but a prefix length of 0
//     cannot even be encoded by vishvananda/netlink, which would add the host address instead.
//   - Testing a host address against hash:net or hash:ip,port,net matches a member net
//     containing it; a net is tested exactly.
//   - Destroy without NLM_F_EXCL succeeds for a missing set on newer kernels; we send EXCL.
//   - Swap keeps iptables references with the names, so Replace works on referenced sets.
//   - The hash size the kernel reports grows with the set; Create's "same set" check, like the
//     kernel's own, ignores it.
package ipset
