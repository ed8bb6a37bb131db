// Package oci holds a container image's file system as a Tree and writes it, with an image
// config, as an OCI image-layout archive (a tar) that registries (crane push, skopeo copy
// oci-archive:) and containerd (ctr images import) take. The output depends on nothing but its
// inputs: entries are sorted, owned by root, and stamped with one fixed time, so the same inputs
// give the same digests.
package oci
