// Package daemon is `kipvs run`: it wires a Service source (the API or a file) through the
// pure desired-state builder (proxy) into one reconciler per IP family, scheduled by the
// runner, and serves health and metrics. Everything kernel-facing comes in through Deps, so
// the whole daemon runs over fakes in unit tests.
//
// Its files:
//   - daemon.go: New, Prepare (sysctls, the dummy link, the first checks) and Run (the
//     runner, the source's notifications, the drain loop);
//   - sync.go: the syncs the runner asks for: incremental, full, the periodic full sync in
//     two parts, and their metrics;
//   - options.go: the proxy options of a family from the configuration, the Node, the
//     host's addresses and link prefixes, and the apiserver's addresses;
//   - probe.go: the probes of the IPVS schedulers Services ask for;
//   - report.go: each Service's problems as Warning Events and logs, and the clusterCIDR
//     check; eventagg.go and events.go send the Events;
//   - healthchecks.go: the healthCheckNodePort servers;
//   - state.go: the /debug/kipvs/state document;
//   - real.go: the real kernel adapters and Service source (Deps) of a node;
//   - sysctls.go: the sysctls and IPVS timeouts IPVS mode needs.
package daemon
