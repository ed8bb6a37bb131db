// Package netfilter keeps kipvs's iptables chains in one network namespace and one address
// family in the state a declarative Ruleset describes, without knowing what the rules mean.
//
// kipvs owns a declared set of chains per table (upstream kube-proxy's IPVS-mode set, named in
// internal/ipvsmode) and every rule in a built-in chain that jumps to one of them. Apply reads all
// tables with one iptables-save, computes the difference per table and writes it with one
// `iptables-restore --noflush --counters` whose input has one section per table that differs;
// each section commits on its own, so each table changes atomically or not at all. In a section,
// a chain whose content differs is declared (`:CHAIN - [0:0]`, which under --noflush flushes just
// that chain) and refilled, missing jumps are inserted (never duplicated), and jumps and owned
// chains no longer wanted are deleted, the chains last. A table that already matches is not
// written. Chains and rules kipvs does not own are never written: a foreign chain, and a foreign
// rule in a built-in chain, survive byte-identical.
//
// The real implementation (New) runs the iptables-nft-* or iptables-legacy-* binaries
// (ip6tables-* for IPv6; Detect chooses the backend) inside the handle's namespace. The fake
// (netfiltertest.NewFake) models the kernel's tables and interprets the same restore
// payloads. Both produce the same Dump, the iptables-save text of what kipvs owns (see
// Format), so one golden file checks both.
//
// Rules are written as iptables-save prints them (see Canonical), because drift is detected by
// comparing the text iptables-save returns with the desired text.
package netfilter
