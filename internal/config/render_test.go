package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fileOnly drops what a KubeProxyConfiguration cannot hold.
func fileOnly(c Config) Config {
	c.ClientConnection.Master = ""
	c.Kipvs = FileDefaults().Kipvs
	c.ConfigFile, c.WriteConfigTo, c.Cleanup, c.InitOnly = "", "", false, false
	return c
}

func TestRoundTrip(t *testing.T) {
	everything := Config{
		Mode: ProxyModeIPVS,
		ClientConnection: ClientConnection{Kubeconfig: "/k", Master: "https://m", AcceptContentTypes: "application/json",
			ContentType: ContentTypeJSON, QPS: 7.5, Burst: 15},
		ConfigSyncPeriod:    3 * time.Minute,
		HostnameOverride:    "node-1",
		BindAddress:         netip.MustParseAddr("fd00::7"),
		HealthzBindAddress:  mustAddrPort("[fd00::7]:9000"),
		MetricsBindAddress:  mustAddrPort("10.0.0.7:9001"),
		BindAddressHardFail: true,
		EnableProfiling:     true,
		ClusterCIDRs:        []netip.Prefix{mustPrefix("fd00:10:244::/56"), mustPrefix("10.244.0.0/16")},
		DetectLocalMode:     LocalModeBridgeInterface,
		BridgeInterface:     "cbr0",
		InterfaceNamePrefix: "veth",
		NodePortAddresses:   []netip.Prefix{mustPrefix("192.168.0.0/16")},
		MasqueradeAll:       true,
		MasqueradeBit:       0,
		IPVS: IPVS{SyncPeriod: 90 * time.Second, MinSyncPeriod: 1500 * time.Millisecond, Scheduler: "sh",
			ExcludeCIDRs: []netip.Prefix{mustPrefix("10.1.0.0/16")}, StrictARP: true,
			TCPTimeout: time.Hour, TCPFinTimeout: time.Minute, UDPTimeout: time.Second},
		Conntrack: Conntrack{MaxPerCore: 0, Min: 0, TCPEstablishedTimeout: 0, TCPCloseWaitTimeout: 0,
			TCPBeLiberal: true, UDPTimeout: 10 * time.Second, UDPStreamTimeout: 20 * time.Second},
		FeatureGates: map[string]bool{"Gate": false},
		LogFormat:    LogFormatJSON,
		Verbosity:    6,
		Kipvs:        Kipvs{SourceFile: "/s", ServiceCIDRs: []netip.Prefix{mustPrefix("10.96.0.0/12")}, GracefulPeriod: time.Minute, FilterBackend: FilterNFTables},
	}
	primary := Defaults()
	primary.NodePortPrimary = true
	primary.DetectLocalMode = LocalModeNodeCIDR
	seed, err := Parse(readTestdata(t, "seed-ipvs.yaml"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		c    Config
	}{
		{"defaults", Defaults()},
		{"file defaults", FileDefaults()},
		{"everything set", everything},
		{"primary node ports", primary},
		{"seed file", seed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.c.Validate(); err != nil {
				t.Fatalf("test config is invalid: %v", err)
			}
			b, err := tc.c.RenderYAML()
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(b), "apiVersion: kubeproxy.config.k8s.io/v1alpha1\n") || !strings.Contains(string(b), "\nmode: ipvs\n") {
				t.Errorf("not an IPVS KubeProxyConfiguration:\n%s", b)
			}
			log, logs := observed()
			back, err := Parse(b, log)
			if err != nil {
				t.Fatalf("rendered file does not parse: %v\n%s", err, b)
			}
			if diff := cmp.Diff(fileOnly(tc.c), back, cmpConfig()...); diff != "" {
				t.Errorf("(-rendered +parsed back):\n%s\n%s", diff, b)
			}
			wantNotices := 0
			if len(tc.c.FeatureGates) > 0 {
				wantNotices = 1 // featureGates: kept, but kipvs has none
			}
			if n := logs.Len(); n != wantNotices {
				t.Errorf("a rendered file triggers notices %v", noticeFields(logs))
			}
		})
	}
}

// /configz serves KubeProxyConfiguration() as JSON (the server wraps it under
// "kubeproxy.config.k8s.io"); that JSON is itself a valid configuration file.
func TestConfigzJSON(t *testing.T) {
	c := Defaults()
	c.ClusterCIDRs = []netip.Prefix{mustPrefix("10.244.0.0/16")}
	c.IPVS.ExcludeCIDRs = []netip.Prefix{mustPrefix("fd00::/64")}
	body, err := json.Marshal(map[string]any{"kubeproxy.config.k8s.io": c.KubeProxyConfiguration()})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]map[string]any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	kp := got["kubeproxy.config.k8s.io"]
	for k, want := range map[string]any{"mode": "ipvs", "clusterCIDR": "10.244.0.0/16", "kind": Kind, "metricsBindAddress": "127.0.0.1:10249",
		"detectLocalMode": "ClusterCIDR"} {
		if kp[k] != want {
			t.Errorf("%s = %v, want %v", k, kp[k], want)
		}
	}
	if ipvs, _ := kp["ipvs"].(map[string]any); ipvs["syncPeriod"] != "30s" || ipvs["minSyncPeriod"] != "1s" || ipvs["scheduler"] != "" {
		t.Errorf("ipvs section %v", kp["ipvs"])
	}
	inner, err := json.Marshal(kp)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(inner, nil)
	if err != nil {
		t.Fatalf("the /configz JSON does not parse as a configuration: %v", err)
	}
	if diff := cmp.Diff(fileOnly(c), back, cmpConfig()...); diff != "" {
		t.Errorf("(-served +parsed back):\n%s", diff)
	}
}

func TestWriteConfigFile(t *testing.T) {
	c := Defaults()
	c.IPVS.Scheduler = "lc"
	path := filepath.Join(t.TempDir(), "out.yaml")
	if err := os.WriteFile(path, []byte("old content"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteConfigFile(path); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", st.Mode().Perm())
	}
	back, err := loadArgs(t, nil, "--config", path)
	if err != nil {
		t.Fatal(err)
	}
	want := c
	want.ConfigFile = path
	if diff := cmp.Diff(want, back, cmpConfig()...); diff != "" {
		t.Errorf("(-written +read back):\n%s", diff)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
	if err := c.WriteConfigFile(filepath.Join(t.TempDir(), "missing", "out.yaml")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("writing into a missing directory: %v", err)
	}
}

// A disabled server renders as "", which kube-proxy (and kipvs) read as the default.
func TestRenderDisabledServers(t *testing.T) {
	c := Defaults()
	c.HealthzBindAddress, c.MetricsBindAddress = netip.AddrPort{}, netip.AddrPort{}
	kp := c.KubeProxyConfiguration()
	if kp.HealthzBindAddress != "" || kp.MetricsBindAddress != "" {
		t.Errorf("healthz %q metrics %q, want empty", kp.HealthzBindAddress, kp.MetricsBindAddress)
	}
}

// The IPVS scheduler is written as given, as kube-proxy writes it: empty when it was not
// set (kube-proxy resolves it to rr only when it creates its proxier), rr when rr was
// asked for. SchedulerName is what is programmed either way.
func TestRenderSchedulerAsGiven(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		want, name string
	}{
		{nil, "", "rr"},
		{[]string{"--ipvs-scheduler="}, "", "rr"},
		{[]string{"--ipvs-scheduler=rr"}, "rr", "rr"},
		{[]string{"--ipvs-scheduler=mh"}, "mh", "mh"},
	} {
		c, err := loadArgs(t, nil, tc.args...)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.KubeProxyConfiguration().IPVS.Scheduler; got != tc.want {
			t.Errorf("%v: ipvs.scheduler %q, want %q", tc.args, got, tc.want)
		}
		if got := c.IPVS.SchedulerName(); got != tc.name {
			t.Errorf("%v: SchedulerName() %q, want %q", tc.args, got, tc.name)
		}
	}
}

// --write-config-to=/dev/stdout (docs/migration.md) must write to the terminal or pipe
// behind it, not rename a file over the device node's symbolic link; a symbolic link to a
// regular file is written through and stays a link. A FIFO and links in a temporary
// directory stand in for /dev/stdout.
func TestWriteConfigFileThroughLinksAndPipes(t *testing.T) {
	c := Defaults()
	want, err := c.RenderYAML()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	mode := func(p string) os.FileMode {
		st, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		return st.Mode()
	}

	file := filepath.Join(dir, "real.yaml")
	if err := os.WriteFile(file, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.yaml")
	if err := os.Symlink(file, link); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteConfigFile(link); err != nil {
		t.Fatal(err)
	}
	if m := mode(link); m&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced by a file of mode %v", m)
	}
	if got, err := os.ReadFile(file); err != nil || string(got) != string(want) {
		t.Errorf("the file behind the link holds %q (%v)", got, err)
	}

	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	stdout := filepath.Join(dir, "stdout")
	if err := os.Symlink(fifo, stdout); err != nil {
		t.Fatal(err)
	}
	read := make(chan []byte, 1)
	go func() {
		f, err := os.Open(fifo) // blocks until the writer opens it
		if err != nil {
			read <- []byte(err.Error())
			return
		}
		defer f.Close()
		b, _ := io.ReadAll(f)
		read <- b
	}()
	werr := c.WriteConfigFile(stdout)
	// Releases the reader if nothing opened the pipe for writing (no writer is left then).
	if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
		w.Close()
	}
	if werr != nil {
		t.Fatal(werr)
	}
	if got := <-read; string(got) != string(want) {
		t.Errorf("read from the pipe %q", got)
	}
	if m := mode(stdout); m&os.ModeSymlink == 0 {
		t.Errorf("the link to the pipe was replaced by a file of mode %v", m)
	}
	if m := mode(fifo); m&os.ModeNamedPipe == 0 {
		t.Errorf("the pipe was replaced by a file of mode %v", m)
	}
}

// /dev/stdout is a link to /proc/self/fd/1, whose target, when stdout is a pipe, is no
// path ("pipe:[123]"): the writer must not rename a file over the link then (it did, and
// replaced the host's /dev/stdout), nor fail; the bytes go into the pipe. A link in a
// temporary directory to /proc/self/fd/N of an os.Pipe stands in for /dev/stdout, and a
// link to /dev/null for one to a character device.
func TestWriteConfigFileToDescriptorsAndDevices(t *testing.T) {
	c := Defaults()
	want, err := c.RenderYAML()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	isLink := func(p string) bool {
		st, err := os.Lstat(p)
		return err == nil && st.Mode()&os.ModeSymlink != 0
	}
	throughPipe := func(path func(w *os.File) string) {
		t.Helper()
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		read := make(chan []byte, 1)
		go func() {
			b, _ := io.ReadAll(r)
			read <- b
		}()
		p := path(w)
		werr := c.WriteConfigFile(p)
		w.Close()
		if werr != nil {
			t.Errorf("%s: %v", p, werr)
		}
		if got := <-read; string(got) != string(want) {
			t.Errorf("%s: read from the pipe %d bytes, want the %d of the configuration", p, len(got), len(want))
		}
	}
	throughPipe(func(w *os.File) string { return fmt.Sprintf("/proc/self/fd/%d", w.Fd()) })
	stdout := filepath.Join(dir, "stdout")
	throughPipe(func(w *os.File) string {
		if err := os.Symlink(fmt.Sprintf("/proc/self/fd/%d", w.Fd()), stdout); err != nil {
			t.Fatal(err)
		}
		return stdout
	})
	if !isLink(stdout) {
		t.Errorf("the link to the pipe's descriptor was replaced")
	}

	null := filepath.Join(dir, "null")
	if err := os.Symlink("/dev/null", null); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteConfigFile(null); err != nil {
		t.Error(err)
	}
	if !isLink(null) {
		t.Errorf("the link to /dev/null was replaced")
	}
	if st, err := os.Stat("/dev/null"); err != nil || st.Mode()&os.ModeCharDevice == 0 {
		t.Errorf("/dev/null is no longer a character device: %v %v", st.Mode(), err)
	}

	// A link to nothing is never replaced: it is an error.
	dangling := filepath.Join(dir, "dangling")
	if err := os.Symlink(filepath.Join(dir, "nothing"), dangling); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteConfigFile(dangling); err == nil || !isLink(dangling) {
		t.Errorf("a dangling link: error %v, still a link %v", err, isLink(dangling))
	}
}

// "-" is standard output.
func TestWriteConfigToStdout(t *testing.T) {
	c := Defaults()
	want, err := c.RenderYAML()
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if err := c.writeConfig("-", &got); err != nil {
		t.Fatal(err)
	}
	if got.String() != string(want) {
		t.Errorf("wrote %q to stdout", got.String())
	}
	if _, err := os.Stat("-"); err == nil {
		t.Errorf("a file named - was created")
	}
}
