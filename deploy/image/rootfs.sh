#!/bin/sh
# rootfs.sh OUT: assembles the kipvs image's whole root file system in OUT, from the iptables
# installed on this (Debian) system, all but the kipvs binary itself (OUT/usr/local/bin/kipvs).
#
# kipvs runs exactly eight programs: {ip,ip6}tables-{nft,legacy}-{save,restore}. Everything
# else (IPVS, ipsets, kube-ipvs0, conntrack, sysctls) it does over netlink and /proc. So the
# image holds those eight (symlinks to the two xtables multi-call binaries), every iptables
# extension module (kipvs's own rules need a few, but it reads the node's whole ruleset with
# *-save, which must be able to print the other rules on the node as well), the shared
# libraries all of these need (at the paths the loader looks for them), /etc/protocols for
# protocol names, and empty /dev, /proc, /sys (the container runtime mounts them), /run
# (xtables.lock) and /tmp. No shell, no package manager, no ipvsadm, ipset or conntrack
# tools.
#
# The Containerfile runs it in a Debian build stage and copies OUT onto scratch; the e2e
# test TestImageRootfs runs kipvs from a chroot of OUT against a real kernel.
set -eu
out=${1:?usage: rootfs.sh OUT}
mkdir -p "$out/usr/sbin" "$out/usr/local/bin" "$out/etc" "$out/dev" "$out/proc" "$out/sys" "$out/run" "$out/tmp"
chmod 1777 "$out/tmp"
for m in nft legacy; do
	cp -L "/usr/sbin/xtables-$m-multi" "$out/usr/sbin/"
	for t in iptables ip6tables; do
		for op in save restore; do
			ln -sf "xtables-$m-multi" "$out/usr/sbin/$t-$m-$op"
		done
	done
done
found=
for xt in /usr/lib/*/xtables; do
	[ -d "$xt" ] || continue
	found=1
	mkdir -p "$out$xt"
	cp -L "$xt"/*.so "$out$xt/"
done
[ -n "$found" ] || { echo "rootfs.sh: no iptables extension directory /usr/lib/*/xtables" >&2; exit 1; }
cp -L /etc/protocols "$out/etc/protocols"
# Every shared library the binaries and the extension modules load, and the loader itself.
for f in "$out"/usr/sbin/xtables-*-multi "$out"/usr/lib/*/xtables/*.so; do
	ldd "$f"
done | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' | sort -u |
	while read -r lib; do
		mkdir -p "$out$(dirname "$lib")"
		cp -L "$lib" "$out$lib"
	done
