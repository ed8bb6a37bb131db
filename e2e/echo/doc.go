// Command echo is the test backend of kipvs's VM tests and demo: it answers every HTTP
// request on TCP and every datagram on UDP with one line naming itself and the client's
// address as it sees it, so a test can tell which backend answered and whether the source
// was masqueraded.
//
//	echo -name pod-a -listen :8080
//
// HTTP: GET / answers "pod-a 10.244.9.9:51234\n". UDP: any datagram is answered the same way.
// GET /hold answers the same line and then keeps the connection open, echoing every line the
// client sends, so a test can hold an established connection through IPVS (it counts as an
// active connection of its real server) and later prove it was never cut. With -sctp it also
// answers the first message of every SCTP association on the listen port the same way.
//
// As a client (the node smoke's pods have no curl): `echo -get URL` prints the body of one GET
// (5 s limit) and exits non-zero on an error or a status other than 200. `echo -resolve NAME`
// prints NAME's IPv4 addresses ("NAME IP[,IP...] via SERVER/NET in DURATION") as Go's resolver gets them,
// from /etc/resolv.conf's nameserver or from -dns-server HOST:PORT, over -dns-net udp or tcp
// (the node's DNS check; the image has no DNS tool), and exits non-zero when there is none.
package main
