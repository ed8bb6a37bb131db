// Package vm boots the kipvs kernel-test VM: a stock Debian kernel (which has IPVS, dummy,
// ip_set and nf_tables modules) under qemu/TCG with the host root shared read-only over 9p,
// and runs one shell script inside it. See e2e/vm/README.md for the recipe.
package vm
