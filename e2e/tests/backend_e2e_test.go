//go:build e2e

package tests

import (
	"strings"
	"testing"

	"github.com/kipvs/kipvs/e2e/harness"
)

// filterBackend is a value of `kipvs run --kipvs-filter-backend`: what writes the packet
// filter next to IPVS.
type filterBackend string

const (
	// iptablesBackend writes the KUBE-* iptables chains and ipsets, as kube-proxy's IPVS
	// mode does (kipvs's default).
	iptablesBackend filterBackend = "iptables"
	// nftablesBackend writes the tables ip kipvs and ip6 kipvs, and no iptables rule and no
	// ipset.
	nftablesBackend filterBackend = "nftables"
)

// filterBackends are the backends eachBackend runs a scenario with.
func filterBackends() []filterBackend { return []filterBackend{iptablesBackend, nftablesBackend} }

// args are the `kipvs run` flags that select b; none for the zero value (kipvs's default).
func (b filterBackend) args() []string {
	if b == "" {
		return nil
	}
	return []string{"--kipvs-filter-backend=" + string(b)}
}

// eachBackend runs body once per filter backend, as a subtest named for it with a
// scenario of its own (newScenario) whose startKipvs and startChecked select that backend
// and, once kipvs has synced, check the kernel holds that backend's filter and none of the
// other's (expectBackendState). The bodies assert packets, which must not depend on the
// backend.
func eachBackend(t *testing.T, body func(t *testing.T, s *scenario)) {
	t.Helper()
	for _, b := range filterBackends() {
		t.Run(string(b), func(t *testing.T) {
			s := newScenario(t)
			s.backend = b
			body(t, s)
		})
	}
}

// expectBackendState fails the test for each of backendProblems: the kernel must hold the
// filter of the scenario's backend and nothing of the other. A scenario without a backend
// (newScenario alone) checks nothing.
func (s *scenario) expectBackendState() {
	s.t.Helper()
	if s.backend == "" {
		return
	}
	for _, p := range backendProblems(s.backend) {
		s.t.Errorf("%s backend: %s", s.backend, p)
	}
}

// backendProblems lists how the kernel differs from what filter backend b alone writes:
// with nftables, the table ip kipvs with its services chain, no KUBE- chain or rule in
// iptables-save or ip6tables-save and no ipset at all; with iptables, the KUBE-SERVICES
// chain and neither kipvs table.
func backendProblems(b filterBackend) []string {
	var out []string
	run := func(name string, args ...string) (string, bool) {
		text, err := harness.Run(name, args...)
		if err != nil {
			out = append(out, err.Error())
		}
		return text, err == nil
	}
	rules := func(save string) string {
		text, _ := run(save)
		var kube []string
		for _, l := range strings.Split(text, "\n") {
			if strings.Contains(l, "KUBE-") {
				kube = append(kube, l)
			}
		}
		return strings.Join(kube, "\n")
	}
	switch b {
	case nftablesBackend:
		if table, ok := run("nft", "-t", "list", "table", "ip", "kipvs"); ok && !strings.Contains(table, "chain services {") {
			out = append(out, "table ip kipvs has no chain services:\n"+table)
		}
		for _, save := range []string{"iptables-save", "ip6tables-save"} {
			if kube := rules(save); kube != "" {
				out = append(out, save+" shows KUBE- chains or rules:\n"+kube)
			}
		}
		if sets, ok := run("ipset", "list", "-n"); ok && strings.TrimSpace(sets) != "" {
			out = append(out, "ipset list -n shows sets:\n"+sets)
		}
	case iptablesBackend:
		if kube := rules("iptables-save"); !strings.Contains(kube, ":KUBE-SERVICES") {
			out = append(out, "iptables-save has no KUBE-SERVICES chain:\n"+kube)
		}
		tables, err := harness.KipvsTables()
		if err != nil {
			out = append(out, err.Error())
		}
		for _, tab := range tables {
			out = append(out, "nft list tables shows the nftables backend's "+tab)
		}
	}
	return out
}
