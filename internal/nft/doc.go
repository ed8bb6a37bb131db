// Package nft is kipvs's nf_tables adapter: one table of one family that kipvs owns whole
// (Table, "kipvs"), changed in nft transactions through sigs.k8s.io/knftables (which runs
// the nft program, as kube-proxy's nftables mode does) and read back as the elements of
// its sets and the chains with their rules as nft prints them.
//
// The fake (package nfttest) is knftables' own Fake, which models the table, its sets and
// chains and answers not-found and exists errors as the kernel does, plus a faulty mode.
package nft
