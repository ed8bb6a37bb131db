package debugapi

import "time"

// DebugPrefix is where kipvs's debug endpoints (StatePath, VirtualServersPath) live.
const DebugPrefix = "/debug/kipvs/"

// DebugHeader is set on what the metrics server answers under DebugPrefix while the debug
// endpoints are off, with the value DebugDisabled, so clients (kipvs doctor, kipvs status
// --services) can tell "kipvs, endpoints off" from "not kipvs" (kube-proxy answers a plain
// 404).
const (
	DebugHeader   = "X-Kipvs-Debug-Endpoints"
	DebugDisabled = "disabled"
)

// DebugDisabledHint is the fix clients print when the debug endpoints are off.
const DebugDisabledHint = "start kipvs run with --kipvs-debug-endpoints (they list every Service, pod IP and rule of the node: keep --metrics-bind-address on 127.0.0.1 then)"

// VirtualServersPath is a read-only debug endpoint of the metrics server: the virtual
// servers the daemon wants (its desired state, both families) and the Service port each
// one is programmed for. `kipvs status --services` reads it.
const VirtualServersPath = "/debug/kipvs/virtualservers"

// VirtualServer is one entry of the VirtualServersPath document.
type VirtualServer struct {
	// Protocol is "TCP", "UDP" or "SCTP".
	Protocol string `json:"protocol"`
	Address  string `json:"address"`
	Port     uint16 `json:"port"`
	// Kind is ClusterIP, ExternalIP, LoadBalancer or NodePort.
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// PortName is the Service port's name ("" for an unnamed port).
	PortName     string `json:"portName,omitempty"`
	Destinations int    `json:"destinations"`
}

// VirtualServerList is the VirtualServersPath document.
type VirtualServerList struct {
	Items []VirtualServer `json:"items"`
}

// StatePath is a read-only debug endpoint of the metrics server: the kernel state the
// daemon wants, per IP family (set members, kube-ipvs0 addresses, virtual servers, its
// chains, named as its filter backend names them), and the real servers it is draining.
// `kipvs doctor` compares it with the kernel to find drift.
const StatePath = "/debug/kipvs/state"

// State is the StatePath document.
type State struct {
	// Dummy is the link the VIPs are bound on (kube-ipvs0).
	Dummy string `json:"dummy"`
	// FilterBackend is the packet-filter backend the daemon runs (--kipvs-filter-backend):
	// "iptables" (Sets are ipsets, Rules iptables chains) or "nftables" (Sets are the sets
	// of table ip kipvs / ip6 kipvs, Rules their chains). Absent from an older daemon.
	FilterBackend string `json:"filterBackend,omitempty"`
	// GracefulPeriod is how long a removed TCP real server drains at weight 0 at most (Go
	// duration); 0: until its connections end.
	GracefulPeriod string `json:"gracefulPeriod"`
	// Schedulers maps every IPVS scheduler the daemon probed (the configured one, and those
	// Services ask for with kipvs.io/scheduler) to whether it is available.
	Schedulers map[string]bool `json:"schedulers"`
	// ServiceCIDRs are the Service CIDRs the daemon learned from its source (ServiceCIDR
	// objects); empty when it knows none.
	ServiceCIDRs []string `json:"serviceCIDRs"`
	// Families holds one entry per IP family the daemon runs.
	Families []FamilyState `json:"families"`
}

// FamilyState is one IP family's part of State.
type FamilyState struct {
	// Family is "IPv4" or "IPv6".
	Family string `json:"family"`
	// Synced is true once the family's first full sync compared everything, and false
	// again while a failed kernel read waits for the next full sync.
	Synced bool `json:"synced"`
	// Failed lists the objects whose last change the kernel refused; each is retried on
	// its own, with backoff, and the kernel differs from the rest of this document for them.
	Failed []FailedObject `json:"failed,omitempty"`
	// Addresses are the VIPs to bind on Dummy, sorted.
	Addresses []string `json:"addresses"`
	// Sets lists every set kipvs owns in this family (an ipset, or a set of the family's
	// nftables table), with its desired members as the backend writes them.
	Sets []SetState `json:"sets"`
	// VirtualServers are the desired virtual servers.
	VirtualServers []VirtualServer `json:"virtualServers"`
	// Rules is kipvs's desired packet filter of this family: with iptables its chains and
	// the jumps into them as iptables-save prints them (netfilter.Format); with nftables the
	// chains of its table with their hooks and rules as nft prints them.
	Rules string `json:"rules"`
	// Draining are the real servers at weight 0 waiting for their connections to end.
	Draining []DrainingRealServer `json:"draining"`
	// Capacity is the use of the node-wide capacity budgets (absent from a daemon that does
	// not report it).
	Capacity *Capacity `json:"capacity,omitempty"`
}

// Capacity is how much of the node-wide budgets (--kipvs-max-set-members,
// --kipvs-max-real-servers) the Services use, and what the capacity limits keep out.
type Capacity struct {
	// NotProgrammed counts the Services not programmed for a capacity limit, by reason
	// (TooManySetMembers, SetCapacityExceeded, ...), as kipvs_services_not_programmed.
	NotProgrammed map[string]int `json:"notProgrammed"`
	// Budgets lists the budgets in use: each set by kind ("cluster-ip"), then "real-servers".
	Budgets []Budget `json:"budgets"`
}

// Budget is one node-wide budget: Used of Limit (0: no limit), and the namespace whose
// Services hold the most of it (TopUsed of Used).
type Budget struct {
	Name         string `json:"name"`
	Used         int    `json:"used"`
	Limit        int    `json:"limit"`
	TopNamespace string `json:"topNamespace"`
	TopUsed      int    `json:"topUsed"`
}

// FailedObject is a kernel object kipvs failed to apply and retries.
type FailedObject struct {
	// Kind is virtual_server, ipset_member, address, ipset or iptables_ruleset.
	Kind string `json:"kind"`
	// Object names it: "tcp/10.96.0.10:80", "KUBE-CLUSTER-IP 10.96.0.10,tcp:80", an address.
	Object   string    `json:"object"`
	Error    string    `json:"error"`
	Attempts int       `json:"attempts"`
	RetryAt  time.Time `json:"retryAt"`
}

// SetState is one set with its desired members in its backend's notation (ipset's
// "10.96.0.10,tcp:80", nft's "10.96.0.10 . tcp . 80").
type SetState struct {
	Name    string   `json:"name"`
	Type    string   `json:"type"`
	Members []string `json:"members"`
}

// DrainingRealServer is a real server kipvs set to weight 0 and will delete once it has no
// connections, or GracefulPeriod after Since (never, when GracefulPeriod is 0).
type DrainingRealServer struct {
	Protocol string `json:"protocol"`
	Address  string `json:"address"`
	Port     uint16 `json:"port"`
	// RealServer is the real server's address:port.
	RealServer string    `json:"realServer"`
	Since      time.Time `json:"since"`
}
