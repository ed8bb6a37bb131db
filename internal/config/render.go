package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	componentbaseconfig "k8s.io/component-base/config/v1alpha1"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/kube-proxy/config/v1alpha1"
	"sigs.k8s.io/yaml"
)

// defaultKubeProxyConfiguration is the KubeProxyConfiguration kube-proxy v1.34 fills in for
// an empty file (its v1alpha1 defaulting; mode and detectLocalMode are left empty).
func defaultKubeProxyConfiguration() *v1alpha1.KubeProxyConfiguration {
	dur := func(d time.Duration) metav1.Duration { return metav1.Duration{Duration: d} }
	zeroQuantity := func() resource.QuantityValue {
		q := resource.QuantityValue{Quantity: *resource.NewQuantity(0, resource.DecimalSI)}
		_ = q.String() // caches the text form, so that equal values compare equal
		return q
	}
	return &v1alpha1.KubeProxyConfiguration{
		TypeMeta:     metav1.TypeMeta{APIVersion: APIVersion, Kind: Kind},
		FeatureGates: map[string]bool{},
		ClientConnection: v1alpha1ClientConnection(ClientConnection{
			ContentType: ContentTypeProtobuf, QPS: 5, Burst: 10,
		}),
		Logging: logsapi.LoggingConfiguration{
			Format:         "text",
			FlushFrequency: logsapi.TimeOrMetaDuration{Duration: dur(5 * time.Second), SerializeAsString: true},
			Options: logsapi.FormatOptions{
				Text: logsapi.TextOptions{OutputRoutingOptions: logsapi.OutputRoutingOptions{InfoBufferSize: zeroQuantity()}},
				JSON: logsapi.JSONOptions{OutputRoutingOptions: logsapi.OutputRoutingOptions{InfoBufferSize: zeroQuantity()}},
			},
		},
		BindAddress:        "0.0.0.0",
		HealthzBindAddress: fmt.Sprintf("0.0.0.0:%d", DefaultHealthzPort),
		MetricsBindAddress: fmt.Sprintf("127.0.0.1:%d", DefaultMetricsPort),
		IPTables: v1alpha1.KubeProxyIPTablesConfiguration{
			MasqueradeBit:      ptrTo[int32](14),
			LocalhostNodePorts: ptrTo(true),
			SyncPeriod:         dur(30 * time.Second),
			MinSyncPeriod:      dur(time.Second),
		},
		IPVS: v1alpha1.KubeProxyIPVSConfiguration{
			SyncPeriod: dur(30 * time.Second),
		},
		NFTables: v1alpha1.KubeProxyNFTablesConfiguration{
			MasqueradeBit: ptrTo[int32](14),
			SyncPeriod:    dur(30 * time.Second),
			MinSyncPeriod: dur(time.Second),
		},
		OOMScoreAdj: ptrTo[int32](-999),
		Conntrack: v1alpha1.KubeProxyConntrackConfiguration{
			MaxPerCore:            ptrTo[int32](32 * 1024),
			Min:                   ptrTo[int32](128 * 1024),
			TCPEstablishedTimeout: ptrTo(dur(24 * time.Hour)),
			TCPCloseWaitTimeout:   ptrTo(dur(time.Hour)),
		},
		ConfigSyncPeriod: dur(15 * time.Minute),
	}
}

// KubeProxyConfiguration renders c as a complete kube-proxy configuration (mode: ipvs), as
// kube-proxy v1.34 writes it with --write-config-to in IPVS mode (the config differential,
// e2e/configdiff, compares the two). It is also the value /configz is built from. Fields
// kipvs ignores carry kube-proxy's defaults, except the other modes' sync periods, which
// kube-proxy writes as 0s in IPVS mode. Settings a KubeProxyConfiguration cannot hold are
// left out: --master, the --kipvs-* settings and the invocation flags. A disabled health or
// metrics server is rendered as "", which kube-proxy reads as its default.
func (c *Config) KubeProxyConfiguration() *v1alpha1.KubeProxyConfiguration {
	kp := defaultKubeProxyConfiguration()
	for _, e := range table() {
		if e.write != nil {
			e.write(c, kp)
		}
	}
	return kp
}

// RenderYAML renders c as a KubeProxyConfiguration YAML document, as --write-config-to
// writes it.
func (c *Config) RenderYAML() ([]byte, error) {
	b, err := yaml.Marshal(c.KubeProxyConfiguration())
	if err != nil {
		return nil, fmt.Errorf("render configuration as YAML: %w", err)
	}
	return b, nil
}

// WriteConfigFile writes RenderYAML to path (for --write-config-to); "-" is standard
// output. Only a regular file is ever replaced, atomically (a temporary file renamed over
// it), and so is a path that does not exist yet. A symbolic link to a regular file stays a
// link: the file it resolves to is replaced (the operator keeps the link they made, and
// the file's content changes at once). Anything else is written to as it is, as kube-proxy
// writes to it, never replaced: a device (/dev/null, a terminal), a pipe, and any path
// through /proc (/dev/stdout is a link to /proc/self/fd/1, which names a descriptor, not a
// path: the pipe or file the shell opened, which gets the bytes; a regular file there is
// appended to, as the shell's >> would be). A link to nothing is an error.
func (c *Config) WriteConfigFile(path string) error {
	return c.writeConfig(path, os.Stdout)
}

func (c *Config) writeConfig(path string, stdout io.Writer) error {
	b, err := c.RenderYAML()
	if err != nil {
		return err
	}
	if path == "-" {
		if _, err := stdout.Write(b); err != nil {
			return fmt.Errorf("write configuration to standard output: %w", err)
		}
		return nil
	}
	st, err := os.Stat(path)
	switch {
	case err == nil && !st.Mode().IsRegular():
		return writeInPlace(path, b, 0)
	case err == nil && throughProc(path):
		return writeInPlace(path, b, os.O_APPEND)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("write configuration to %s: %w", path, err)
	}
	target := path
	if resolved, err := filepath.EvalSymlinks(path); err == nil {
		target = resolved
	} else if lst, lerr := os.Lstat(path); lerr == nil && lst.Mode()&os.ModeSymlink != 0 {
		return fmt.Errorf("write configuration to %s: a symbolic link to a missing file, not replaced: %w", path, err)
	}
	if err := replaceFile(target, b); err != nil {
		return fmt.Errorf("write configuration to %s: %w", path, err)
	}
	return nil
}

// throughProc reports whether path is in /proc or a chain of symbolic links from it passes
// through /proc (/dev/stdout, /dev/fd/N): it names an open descriptor.
func throughProc(path string) bool {
	const hops = 40 // the kernel's own limit on links followed
	for range hops {
		if abs, err := filepath.Abs(path); err == nil && (abs == "/proc" || strings.HasPrefix(abs, "/proc/")) {
			return true
		}
		dest, err := os.Readlink(path)
		if err != nil {
			return false
		}
		if !filepath.IsAbs(dest) {
			dest = filepath.Join(filepath.Dir(path), dest)
		}
		path = dest
	}
	return false
}

// writeInPlace writes b into what exists at path (flag: more open flags).
func writeInPlace(path string, b []byte, flag int) error {
	f, err := os.OpenFile(path, os.O_WRONLY|flag, 0)
	if err != nil {
		return fmt.Errorf("write configuration to %s: %w", path, err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("write configuration to %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write configuration to %s: %w", path, err)
	}
	return nil
}

// replaceFile replaces the regular file path with b (mode 0644) by renaming a temporary
// file of the same directory over it.
func replaceFile(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func v1alpha1ClientConnection(cc ClientConnection) componentbaseconfig.ClientConnectionConfiguration {
	return componentbaseconfig.ClientConnectionConfiguration{
		Kubeconfig:         cc.Kubeconfig,
		AcceptContentTypes: cc.AcceptContentTypes,
		ContentType:        cc.ContentType,
		QPS:                cc.QPS,
		Burst:              cc.Burst,
	}
}

func addrString(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}

func addrPortString(ap netip.AddrPort) string {
	if ap == (netip.AddrPort{}) {
		return ""
	}
	return ap.String()
}

func prefixStrings(ps []netip.Prefix) []string {
	if len(ps) == 0 {
		return nil
	}
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}

func ptrTo[T any](v T) *T { return &v }
