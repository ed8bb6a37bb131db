// Command kipvs is a drop-in replacement for kube-proxy in IPVS mode.
package main
