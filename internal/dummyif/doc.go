// Package dummyif manages the dummy link that holds the IPVS virtual addresses
// (kube-ipvs0 in kube-proxy): the link itself and its /32 and /128 addresses.
//
// The link is created DOWN, as upstream kube-proxy leaves it, and an existing link's state
// is never changed. A VIP on a down dummy link still gets its local route in table local,
// for IPv4 and IPv6 alike, so IPVS accepts traffic to it both from other hosts and from the
// node itself (checked in the kernel tests). Being down does not hide the addresses: they
// are local addresses of the node like any other (which is why kube-proxy's strictARP sets
// arp_ignore and arp_announce). IPv6 addresses are added with IFA_F_NODAD ("nodad"), so they
// are never tentative; on a down link no DAD runs anyway.
//
// Addresses are handled as host prefixes: AddAddress(10.96.0.1) adds 10.96.0.1/32 and
// DeleteAddress removes exactly that prefix. Addresses lists everything on the link with
// its real prefix length, including addresses other tools added with other lengths and,
// if someone brought the link up, its IPv6 link-local address.
package dummyif
