#!/bin/sh
# prepare.sh CACHE_DIR
#
# Builds (once) everything the kernel test VM needs into CACHE_DIR/<kernel-version>/:
#   vmlinuz              the stock Debian linux-image-*-amd64 kernel
#   lib/modules/<ver>/   its modules, depmod'ed (bound into the VM over 9p)
#   initramfs.cpio.gz    static busybox, the virtio/9p modules and our init
# and writes CACHE_DIR/current with the kernel version. Needs: apt-get, dpkg-deb,
# depmod (kmod), cpio, busybox-static. Idempotent: an existing complete cache is reused.
set -eu

cache=${1:?usage: prepare.sh CACHE_DIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)

# The ABI package that the linux-image-amd64 metapackage depends on right now.
pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | sed -n 's/^ *Depends: \(linux-image-[0-9].*-amd64\)$/\1/p' | head -n1)
if [ -z "$pkg" ]; then
	echo "prepare.sh: cannot resolve linux-image-amd64 (run apt-get update?)" >&2
	exit 1
fi
kver=${pkg#linux-image-}
dir=$cache/$kver

# The init script is part of the cache key: a changed init rebuilds the initramfs.
stamp=$(cat "$here/init.sh" "$0" | sha256sum | cut -c1-16)
if [ -f "$dir/vmlinuz" ] && [ -f "$dir/initramfs.cpio.gz" ] && [ "$(cat "$dir/stamp" 2>/dev/null)" = "$stamp" ]; then
	echo "$kver" >"$cache/current"
	exit 0
fi

echo "prepare.sh: building VM kernel cache for $kver in $dir" >&2
rm -rf "$dir"
mkdir -p "$dir/dl"
(cd "$dir/dl" && apt-get download "$pkg" >/dev/null 2>&1) || {
	echo "prepare.sh: apt-get download $pkg failed" >&2
	exit 1
}
dpkg-deb -x "$dir"/dl/*.deb "$dir/root"
mv "$dir/root/boot/vmlinuz-$kver" "$dir/vmlinuz"
mkdir -p "$dir/lib/modules"
mv "$dir/root/lib/modules/$kver" "$dir/lib/modules/$kver"
rm -rf "$dir/root" "$dir/dl"
depmod -b "$dir" "$kver"

busybox=/bin/busybox
if ! ldd "$busybox" 2>&1 | grep -q 'not a dynamic executable'; then
	echo "prepare.sh: $busybox is not static; install busybox-static" >&2
	exit 1
fi

ird=$dir/initramfs
mkdir -p "$ird/bin" "$ird/sbin" "$ird/proc" "$ird/sys" "$ird/dev" "$ird/host" "$ird/out" "$ird/lib/modules/$kver"
cp "$busybox" "$ird/bin/busybox"
cp "$here/init.sh" "$ird/init"
chmod 755 "$ird/init"

# Modules needed before the host root is mounted, with their dependencies from modules.dep.
moddir=$dir/lib/modules/$kver
deps() {
	line=$(grep -E "(^|/)$1\.ko(\.[a-z]+)?:" "$moddir/modules.dep" | head -n1)
	[ -n "$line" ] || { echo "prepare.sh: module $1 not found" >&2; exit 1; }
	echo "${line%%:*}"
	echo "${line#*:}" | tr ' ' '\n' | sed '/^$/d'
}
for m in virtio_pci 9pnet_virtio 9p virtio_net; do
	deps "$m"
done | sort -u | while read -r f; do
	mkdir -p "$ird/lib/modules/$kver/$(dirname "$f")"
	cp "$moddir/$f" "$ird/lib/modules/$kver/$f"
done
for f in modules.dep modules.alias modules.symbols modules.builtin modules.order modules.dep.bin modules.alias.bin modules.symbols.bin modules.builtin.bin; do
	[ -f "$moddir/$f" ] && cp "$moddir/$f" "$ird/lib/modules/$kver/"
done
(cd "$ird" && find . | cpio -o -H newc --quiet) | gzip -1 >"$dir/initramfs.cpio.gz"
rm -rf "$ird"
echo "$stamp" >"$dir/stamp"
echo "$kver" >"$cache/current"
echo "prepare.sh: ready: $dir" >&2
