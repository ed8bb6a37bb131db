// Package bench is `make bench-compare`: kube-proxy v1.34.10 (in its IPVS, nftables and
// iptables modes) and kipvs, side by side, on the same API objects in the same VM boot,
// measured from outside the same way.
//
// The host driver (cmd/benchcompare) starts the test etcd and kube-apiserver (e2e/cluster),
// loads N ClusterIP Services, each with one EndpointSlice of E ready endpoints (Objects,
// Load), and for each N boots the VM once and runs TestBenchCompare there (bench_e2e_test.go,
// build tag e2e), which runs each proxy of Config.Proxies in turn (KnownProxies: kube-proxy
// is IPVS mode, kube-proxy-nftables and kube-proxy-iptables the same binary with that mode in
// the same KubeProxyConfiguration; kipvs-nftables is kipvs with its nftables filter backend,
// KipvsArgs) on a clean node: between two proxies `kube-proxy
// --cleanup` (after kube-proxy in any mode) and `kipvs cleanup` run, and the test fails when
// any IPVS virtual server, KUBE-* set, KUBE- iptables or ip6tables rule (nft and legacy),
// kube-proxy or kipvs nft table (any family) or kube-ipvs0 is left. It measures:
//
//   - the first complete sync: from the process start until every Service is programmed
//     with exactly its E endpoints, read by the proxy's probe (probe_e2e_test.go): for the
//     IPVS proxies, over netlink one virtual server at a time (no table dump, polls at most
//     every PollInterval and at most half the time); for kube-proxy's nftables mode (table
//     ip kube-proxy) and iptables mode (iptables-nft: table ip nat), over nf_tables netlink
//     with RuleReader, whose dumps the kernel answers for one chain or one map alone (no
//     process, no load of the whole ruleset): polls read which cluster IPs are programmed
//     (the service-ips map, the KUBE-SERVICES chain), and once all are, the whole table
//     (each Service's chain, the endpoint chains it leads to and their DNAT);
//   - change latency: K endpoint changes, spaced, each replacing one endpoint of a random
//     Service and carrying the endpoints.kubernetes.io/last-change-trigger-time annotation;
//     from the API write's return to the new endpoint programmed (that virtual server, or
//     that Service's nftables or iptables chain, its verdict map and the endpoint chains
//     not read before, one dump each, read every ChangePoll; the log gives the polls'
//     count and cost, which a latency includes up to once), and the proxy's own
//     kubeproxy_network_programming_duration_seconds;
//   - CPU: user+system time of the process and its waited-for children (kube-proxy execs
//     ipset, iptables-restore and nft) for the first sync and over an idle window;
//   - peak RSS (VmHWM);
//   - the data path, when the echo backend and the load generator are given
//     (KIPVS_ECHO_BIN, LoadgenEnv): a NodePort Service with TCP and UDP ports created after
//     the others, its endpoints ten echo backends in network namespaces on the pod bridge,
//     and cmd/loadgen in a client namespace (pinned to the last CPU) measuring new TCP
//     connections, kept-alive requests and UDP requests (rate, p50, p99, its own CPU)
//     through the cluster IP, the node port, and straight to one backend (the floor),
//     LoadWorkers workers for LoadDuration each (DataPath);
//   - connection behaviour (Behaviour): what a held connection gets once its endpoint is
//     removed from the slice (its backend still running), and how many backends answer 20
//     new connections to a sessionAffinity: ClientIP Service;
//   - for the proxies of Config.Profiles, Go profiles from /debug/pprof (ProfileCPUIdle and
//     the others), written under the VM's artifacts directory, which the driver copies out.
//
// Each proxy's figures go out as one "BENCH-RESULT {json}" line; the driver collects them
// into a result file (Run), prints MarkdownTable, DataPathTable and BehaviourTable, and
// draws RenderSVG.
package bench
