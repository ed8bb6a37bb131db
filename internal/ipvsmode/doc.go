// Package ipvsmode declares, once, the facts of upstream kube-proxy's IPVS mode that kipvs
// reproduces and that several packages need: the dummy link's name, the iptables chain
// names, the IPVS schedulers and their flags, and the sysctls kipvs sets.
//
// It is a leaf: it imports only the standard library, so the adapters, the daemon, doctor
// and the tests can all depend on it without pulling in one another (or client-go).
package ipvsmode
