// Command benchcompare is make bench-compare: it starts the test etcd and kube-apiserver on
// the host, and for each N (smallest first) loads N ClusterIP Services with one EndpointSlice
// of E endpoints each (adding to the previous N's objects), boots the VM once, and runs the
// bench test binary there (TestBenchCompare: each proxy of --proxies in turn, on a clean node
// each: kube-proxy in IPVS mode, kube-proxy-nftables, kube-proxy-iptables, kipvs; the
// control-plane figures, then, with KIPVS_ECHO_BIN and KIPVS_BENCH_LOADGEN given, the data
// path and connection behaviour). It writes OUT/bench-compare.json (one record per proxy per N), a copy under
// OUT/runs/, the plot OUT/bench-compare.svg (--name changes the base name), and with --docs
// copies both there. The Go profiles of the proxies of --profiles (none by default: the
// profiler's memory and CPU count in the profiled proxy's figures) go to
// OUT/profiles/NAME-PROXY-N/ (bench.ProfileDir).
//
//	benchcompare --test bench.test --env KIPVS_BIN=... --env KIPVS_KUBE_PROXY_BIN=... \
//		--env KIPVS_ECHO_BIN=... --env KIPVS_BENCH_LOADGEN=... --n "500 1000 2000"
package main
