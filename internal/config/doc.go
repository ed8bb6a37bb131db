// Package config is kipvs's configuration: kube-proxy's command-line flags and its
// KubeProxyConfiguration file (kubeproxy.config.k8s.io/v1alpha1), read with kube-proxy's
// names, defaults and meaning for IPVS mode, plus a few kipvs-only settings (--kipvs-*).
//
// The result is a Config with typed fields. Load merges, in this order, the defaults, the
// file given by --config and the flags the user set explicitly, then validates the result;
// every problem is reported at once (errors.Join), each naming the field, its flag and the
// offending value. The effective Config renders back to a KubeProxyConfiguration for
// --write-config-to and /configz.
package config
