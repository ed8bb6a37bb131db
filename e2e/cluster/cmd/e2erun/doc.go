// Command e2erun runs kipvs's API-level end-to-end tests: it starts a real etcd and
// kube-apiserver natively on the host (127.0.0.1 only), boots the test VM with restricted
// networking whose only path out is the apiserver, runs the e2e test binaries inside, and
// stops the cluster. It ends with "e2e: N passed, N failed".
//
//	e2erun --k8s-bin .cache/k8s --test BIN [--test BIN ...] [-- extra test flags]
package main
