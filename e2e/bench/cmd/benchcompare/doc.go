// Command benchcompare is make bench-compare: it starts the test etcd and kube-apiserver on
// the host, and for each N (smallest first) loads N ClusterIP Services with one EndpointSlice
// of E endpoints each (adding to the previous N's objects), boots the VM once, and runs the
// bench test binary there (TestBenchCompare: kube-proxy in IPVS mode, then kipvs, on a clean
// node each). It writes OUT/bench-compare.json (one record per proxy per N), a copy under
// OUT/runs/, the plot OUT/bench-compare.svg (--name changes the base name), and with --docs
// copies both there. The Go profiles of the proxies of --profiles (none by default: the
// profiler's memory and CPU count in the profiled proxy's figures) go to
// OUT/profiles/NAME-PROXY-N/ (bench.ProfileDir).
//
//	benchcompare --test bench.test --env KIPVS_BIN=... --env KIPVS_KUBE_PROXY_BIN=... --n "500 1000 2000"
package main
