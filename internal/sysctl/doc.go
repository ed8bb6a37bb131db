// Package sysctl reads and writes kernel parameters under /proc/sys (or another root, for
// tests), optionally from inside a network namespace: the files under /proc/sys/net belong
// to the network namespace of the thread that opens them, so an instance bound to a
// namespace handle opens every file from a thread inside that namespace.
//
// # Keys
//
// A key is given in slash form ("net/ipv4/vs/conntrack") or dotted form
// ("net.ipv4.vs.conntrack"); both name the same file. The form is decided by the first
// separator in the key, as sysctl(8) does: when it is a '/', the key is a path and is taken
// literally, so "net/ipv4/conf/eth0.1/rp_filter" names the file of interface "eth0.1".
// When it is a '.', dots separate components and a '/' inside a component stands for a
// dot, so the same file is "net.ipv4.conf.eth0/1.rp_filter". Keys are never guessed:
// "net.ipv4.conf.eth0.1.rp_filter" is the path net/ipv4/conf/eth0/1/rp_filter, which does
// not exist, and gives kerr.ErrNotFound.
//
// # Values
//
// Values are compared and returned with surrounding whitespace removed and inner runs of
// whitespace (the kernel separates the fields of vector values with tabs) collapsed to one
// space, so "32768\t60999\n" reads as "32768 60999" and setting "32768 60999" again is not a
// change.
package sysctl
