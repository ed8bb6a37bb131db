// Command ociimage builds container images without a container engine: from Debian 12 packages
// (apt-get download, unpacked with dpkg-deb, nothing installed) and files of this build, by
// recipe (recipes.go), into an OCI image-layout archive that crane push, skopeo copy
// oci-archive:, podman load, docker load and ctr images import take. It prints the image's
// manifest digest. The output depends only on the inputs: SOURCE_DATE_EPOCH (0 when unset) is
// every file's time and the image's creation time.
//
//	ociimage build RECIPE --out FILE [--input NAME=FILE]... [--tag NAME]... [--label K=V]...
//	               [--debs DIR] [--source-root DIR] [--digest-file FILE]
//	ociimage rootfs RECIPE --out DIR [--source-root DIR | --debs DIR]
//	ociimage list
//
// build writes the archive; rootfs writes the recipe's Debian part (no inputs) into a directory,
// from an installed system (--source-root /, as deploy/Containerfile's build stage does) or from
// the packages. --source-root takes the packages' files from that directory instead of fetching.
package main
