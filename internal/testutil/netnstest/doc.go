// Package netnstest gives kernel tests a fresh, named network namespace each, so the
// standard tools (ipvsadm, ipset, iptables-save, ip, conntrack) can inspect exactly what a
// test programmed via `ip netns exec`. Kernel tests run as root inside the test VM.
package netnstest
