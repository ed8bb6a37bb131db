// Package deploy holds kipvs's deployment files: the kustomize base (DaemonSet, RBAC,
// ConfigMap), the drop-in overlay that replaces a running kube-proxy with its own ConfigMap, the
// systemd units, the Grafana dashboard and the Containerfile (see README.md here). Its Go
// files are only the tests that check them (package deploy_test).
package deploy
