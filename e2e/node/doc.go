// Package node brings up a real single-node Kubernetes cluster for kipvs (docs/conformance-testbed.md):
// etcd, kube-apiserver, kube-controller-manager and kube-scheduler v1.34.10 natively on the
// host; containerd, runc and the CNI plugins from Debian 12's packages and kubelet v1.34.10 in
// the e2e VM (qemu/TCG, stock Debian kernel), linked to the host by a tap device on a private
// subnet; kipvs applied from deploy/ with kubectl as the DaemonSet, its image imported into
// containerd. Smoke checks that one ClusterIP Service answers from a pod through kipvs.
package node
