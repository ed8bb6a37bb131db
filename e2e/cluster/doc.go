// Package cluster runs a real etcd and kube-apiserver natively on the host, on 127.0.0.1
// only, for kipvs's API-level e2e tests. The binaries are built from the nested module in
// e2e/k8s (k8s.io/kubernetes never enters the main module). A VM reaches the apiserver
// through qemu's restricted user networking as https://10.0.2.100:6443.
package cluster
