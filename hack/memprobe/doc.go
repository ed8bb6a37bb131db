// Command memprobe measures kipvs's memory on the host, without the VM: it starts the test
// etcd and kube-apiserver (e2e/cluster), loads N Services x E endpoints as make
// bench-compare does (e2e/bench), and runs the daemon in a child process over the real API
// source (client-go informers, protobuf) and the in-memory fake kernel. The child goes
// through what the VM benchmark measures: the first full sync, spaced endpoint changes (with
// the last-change-trigger-time annotation), then an idle period with periodic full syncs. It
// prints the child's VmHWM, the largest Go heap sampled, and writes heap profiles (after the
// first sync and at the end; alloc_space covers the whole run).
//
//	go run ./hack/memprobe --k8s-bin /work/main/.cache/k8s --n 2000 --e 10 --out /tmp/memprobe
//
// The fake kernel keeps the kernel's state in the child's heap (the real kernel keeps it
// outside the process): the profiles show how much (internal/ipvs.(*Fake) and the other
// fakes), to be discounted when comparing with the VM's figure.
package main
