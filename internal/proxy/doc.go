// Package proxy turns Services and EndpointSlices into the state kipvs wants, as typed values:
// IPVS virtual servers with their real servers, the members of the sets the packet filter
// matches (Member), the VIPs bound on kube-ipvs0, and the facts the filter rules depend on
// (Filter). It is pure: no kernel access, no clocks, no I/O, and no dataplane syntax (a
// dataplane, internal/dataplane, renders sets and rules for one backend). The reconciler
// diffs its output against the kernel and applies the difference.
//
// The unit of work is one Service: BuildService computes a Service's contribution, and
// Desired aggregates contributions with reference counts (two Services may share a VIP or a
// node port set member), reporting exactly which kernel objects a change touched so an
// incremental sync costs O(objects changed).
package proxy
