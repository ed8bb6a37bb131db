// Package harness is the toolkit of kipvs's API-level end-to-end scenarios (e2e/tests): a
// node topology of network namespaces (pods on a bridge, an external client on a veth),
// the cluster objects a scenario needs (Node, Services, EndpointSlices) created through
// client-go, `kipvs run` as a supervised subprocess with its metrics, traffic clients that
// run inside a namespace, and normalised dumps of the kernel state kipvs owns.
//
// Everything here runs as root inside the e2e VM (see e2e/cluster/cmd/e2erun): the test
// binary is "the node" (the VM's root network namespace) and the only path out of the VM
// is the apiserver.
package harness
