// Package conntrack lists and deletes netfilter connection-tracking flows of one network
// namespace, for the stale-flow cleanup a proxy does when a UDP (or SCTP) service or
// endpoint goes away: a flow whose original destination is a removed service address, or
// whose reply source is a removed endpoint, would otherwise keep steering packets.
//
// Deleting is a dump of the table followed by one delete per matching flow (by its
// original tuple, zone and id), as conntrack(8) -D does; a flow that expires or is
// replaced between the two is not counted and is not an error.
package conntrack
