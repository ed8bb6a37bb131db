// Package bench is `make bench-compare`: kube-proxy v1.34.10 in IPVS mode and kipvs, side by
// side, on the same API objects in the same VM boot, measured from outside the same way.
//
// The host driver (cmd/benchcompare) starts the test etcd and kube-apiserver (e2e/cluster),
// loads N ClusterIP Services, each with one EndpointSlice of E ready endpoints (Objects,
// Load), and for each N boots the VM once and runs TestBenchCompare there (bench_e2e_test.go,
// build tag e2e), which runs each proxy in turn on a clean node and measures:
//
//   - the first complete sync: from the process start until IPVS holds all N virtual servers,
//     each with exactly its E real servers (read over netlink one virtual server at a time,
//     no table dump, polls at most every PollInterval and at most half the time);
//   - change latency: K endpoint changes, spaced, each replacing one endpoint of a random
//     Service and carrying the endpoints.kubernetes.io/last-change-trigger-time annotation;
//     from the API write's return to the new real server in IPVS (that one virtual server
//     read every 20 ms), and the proxy's own kubeproxy_network_programming_duration_seconds;
//   - CPU: user+system time of the process and its waited-for children (kube-proxy execs
//     ipset and iptables-restore) for the first sync and over an idle window;
//   - peak RSS (VmHWM);
//   - for the proxies of Config.Profiles, Go profiles from /debug/pprof (ProfileCPUIdle and
//     the others), written under the VM's artifacts directory, which the driver copies out.
//
// Each proxy's figures go out as one "BENCH-RESULT {json}" line; the driver collects them
// into a result file (Run) and draws RenderSVG.
package bench
