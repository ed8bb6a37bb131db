// Package rootfs picks an image's file system out of a source tree (Debian packages unpacked
// by package debian, or an installed system such as a Debian build container's /): the files a
// Selection names, with symbolic links resolved inside the source's root, and every shared
// library their ELF binaries load, found the way the dynamic loader finds them.
package rootfs
