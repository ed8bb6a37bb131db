// Package golden compares test output with files under the calling package's testdata
// directory, and renders errors as the transcripts the adapters' shared op tables record.
//
// Kernel test binaries run inside the VM from wherever they were built, not from their
// package, so testdata is found through the caller's source path (test binaries are built
// without -trimpath). Golden files are rewritten with -update, from the fake runs (the VM
// sees the tree read-only).
package golden
