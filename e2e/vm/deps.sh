#!/bin/sh
# deps.sh: the one place that names the Debian packages `make demo` and `make test` need (the
# VM boots the host's root read-only, so the tools the tests run inside it come from these).
# As root it installs what is missing; otherwise it stops at once with one line naming the
# missing packages and the command that installs them. `.ci/run` and the Makefile call it.
set -eu

packages="qemu-system-x86 busybox-static kmod cpio ipvsadm ipset iptables nftables conntrack socat iproute2 curl"

if [ "${1:-}" = "--list" ]; then
	echo "$packages"
	exit 0
fi

missing=""
for p in $packages; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $p"
done
missing=${missing# }

# prepare.sh resolves the VM's kernel package through apt's lists: they must exist.
need_lists=false
apt-cache show linux-image-amd64 >/dev/null 2>&1 || need_lists=true

if [ -z "$missing" ] && ! $need_lists; then
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	if [ -n "$missing" ]; then
		echo "missing packages: $missing; install them with: sudo apt-get update && sudo apt-get install -y $missing" >&2
	else
		echo "apt's package lists are empty (linux-image-amd64 unknown); run: sudo apt-get update" >&2
	fi
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
if [ -n "$missing" ]; then
	echo "deps.sh: installing $missing" >&2
	apt-get install -y -qq $missing >/dev/null
fi
