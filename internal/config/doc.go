// Package config is kipvs's configuration: kube-proxy's command-line flags and its
// KubeProxyConfiguration file (kubeproxy.config.k8s.io/v1alpha1), read with kube-proxy's
// names, defaults and meaning for IPVS mode, plus a few kipvs-only settings (--kipvs-*).
//
// The result is a Config with typed fields. Load merges, in this order, the defaults, the
// file given by --config and the flags the user set explicitly, then validates the result;
// every problem is reported at once (errors.Join), each naming the field, its flag and the
// offending value. The effective Config renders back to a KubeProxyConfiguration for
// --write-config-to and /configz.
//
// Every setting is declared once, as an entry of the settings table (table, table_*.go):
// its file field, its flag and help, whether kube-proxy applies the flag with --config, and
// how the flag is applied, the field read and the Config written back. AddFlags, Load,
// Parse and KubeProxyConfiguration walk that table; kube-proxy settings kipvs accepts but
// does not act on, and obsolete file fields, are entries too. Settings exposes it to the
// config differential (e2e/configdiff), which tries every entry's sample value against
// kube-proxy.
package config
