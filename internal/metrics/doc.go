// Package metrics defines kipvs's Prometheus metrics. The kubeproxy_* ones keep kube-proxy's
// names, types, labels, help texts and buckets so existing dashboards and alerts keep
// working; kipvs_* are kipvs's own. Nothing registers itself: New builds a Metrics and
// registers it on the registry it is given.
package metrics
