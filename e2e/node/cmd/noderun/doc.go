// Command noderun brings up kipvs's single-node Kubernetes cluster (e2e/node,
// docs/conformance-testbed.md) and runs its smoke: the node Ready, kipvs's DaemonSet pod Ready, one
// ClusterIP Service answering from a pod through kipvs. It prints each step as it goes, the
// wall time of each, `kubectl get pods -A -o wide` and kipvs's IPVS table, and exits non-zero
// naming the first step that failed. Needs root (the tap device).
//
//	noderun --image kipvs.tar --image pause.tar --image echo.tar \
//	    --kipvs-image ghcr.io/kipvs/kipvs:dev --echo-image ... --pause-image registry.k8s.io/pause:3.10.1
package main
