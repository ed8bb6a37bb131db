#!/bin/sh
# prepare.sh CACHE_DIR
#
# Extracts (once) the node's runtime from Debian 12's own packages into CACHE_DIR/<stamp>/root:
# containerd (with ctr and containerd-shim-runc-v2), runc and the CNI plugins
# (usr/lib/cni/bridge, host-local, loopback, portmap, ...). Nothing is installed on the host:
# the packages are fetched with `apt-get download` and unpacked with `dpkg-deb -x`, the way
# e2e/vm/prepare.sh unpacks the kernel, and the VM runs them from the cache over its 9p view of
# the host root. Writes CACHE_DIR/current with the directory's name. Idempotent.
set -eu

cache=${1:?usage: prepare.sh CACHE_DIR}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)

pkgs="containerd runc containernetworking-plugins"
versions=""
for p in $pkgs; do
	v=$(apt-cache policy "$p" 2>/dev/null | sed -n 's/^ *Candidate: //p')
	if [ -z "$v" ] || [ "$v" = "(none)" ]; then
		echo "node prepare.sh: Debian package $p unknown to apt (run apt-get update?)" >&2
		exit 1
	fi
	versions="$versions $p=$v"
done
stamp=$( (echo "$versions"; cat "$0") | sha256sum | cut -c1-16)
dir=$cache/$stamp
if [ -x "$dir/root/usr/bin/containerd" ] && [ -f "$dir/ok" ]; then
	echo "$stamp" >"$cache/current"
	exit 0
fi

echo "node prepare.sh: extracting$versions into $dir" >&2
rm -rf "$dir"
mkdir -p "$dir/dl" "$dir/root"
# shellcheck disable=SC2086
(cd "$dir/dl" && apt-get download $versions >/dev/null 2>&1) || {
	echo "node prepare.sh: apt-get download$versions failed" >&2
	exit 1
}
for f in "$dir"/dl/*.deb; do
	dpkg-deb -x "$f" "$dir/root"
done
rm -rf "$dir/dl"

# The binaries run against the host's libraries (the VM's root is the host's): every one
# they link must be there (runc needs libseccomp2, which Debian installs by default).
for b in usr/bin/containerd usr/bin/containerd-shim-runc-v2 usr/bin/ctr usr/sbin/runc usr/lib/cni/bridge usr/lib/cni/host-local usr/lib/cni/loopback usr/lib/cni/portmap; do
	if [ ! -x "$dir/root/$b" ]; then
		echo "node prepare.sh: $b missing from the packages" >&2
		exit 1
	fi
	if ldd "$dir/root/$b" 2>&1 | grep -q 'not found'; then
		echo "node prepare.sh: $b needs libraries this host lacks:" >&2
		ldd "$dir/root/$b" | grep 'not found' >&2
		exit 1
	fi
done
echo "$versions" >"$dir/versions"
: >"$dir/ok"
echo "$stamp" >"$cache/current"
echo "node prepare.sh: ready: $dir" >&2
