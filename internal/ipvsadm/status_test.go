package ipvsadm

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/netip"
	"strings"
	"syscall"
	"testing"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/kerr"
)

// fakeReader serves a fixed table in a fixed "kernel" order.
type fakeReader struct {
	entries []ipvs.Entry
}

func (f *fakeReader) Info() (ipvs.Info, error) {
	return ipvs.Info{Version: 0x010201, ConnTableSize: 4096}, nil
}
func (f *fakeReader) Timeouts() (ipvs.Timeouts, error) {
	return ipvs.Timeouts{TCP: 900, TCPFin: 120, UDP: 300}, nil
}
func (f *fakeReader) TableKernelOrder() ([]ipvs.Entry, error) { return f.entries, nil }
func (f *fakeReader) EntryKernelOrder(k ipvs.ServiceKey) (ipvs.Entry, error) {
	k, _ = k.Normalize()
	for _, e := range f.entries {
		if e.Service.ServiceKey == k {
			return e, nil
		}
	}
	return ipvs.Entry{}, kerr.Errno("get service", syscall.ESRCH)
}

func run(t *testing.T, args string, env Env) (string, error) {
	t.Helper()
	o, err := Parse(strings.Fields(args), nil)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	err = Run(&b, o, env)
	return b.String(), err
}

func TestRun(t *testing.T) {
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("200.0.0.1")
	r := &fakeReader{entries: []ipvs.Entry{
		{Service: ipvs.Service{ServiceKey: ipvs.ServiceKey{Family: inet.IPv4, Protocol: inet.TCP, Addr: a, Port: 80}, Scheduler: "rr", Netmask: 0xffffffff}},
		{Service: ipvs.Service{ServiceKey: ipvs.ServiceKey{Family: inet.IPv4, Protocol: inet.TCP, Addr: b, Port: 80}, Scheduler: "rr", Netmask: 0xffffffff}},
	}}
	env := Env{IPVS: r}

	// ipvsadm's order (200.x before 10.x: the comparator quirk), one service without header.
	out, err := run(t, "-Ln", env)
	const wantLn = "IP Virtual Server version 1.2.1 (size=4096)\n" +
		"Prot LocalAddress:Port Scheduler Flags\n" +
		"  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn\n" +
		"TCP  200.0.0.1:80 rr\n" +
		"TCP  10.0.0.1:80 rr\n"
	if err != nil || out != wantLn {
		t.Errorf("-Ln: %v\n%s\nwant:\n%s", err, out, wantLn)
	}
	out, err = run(t, "-Ln -t 10.0.0.1:80", env)
	if err != nil || strings.HasPrefix(out, "IP Virtual Server") || !strings.HasSuffix(out, "TCP  10.0.0.1:80 rr\n") {
		t.Errorf("-Ln -t: %v\n%s", err, out)
	}
	if _, err := run(t, "-Ln -t 10.0.0.2:80", env); !errors.Is(err, ErrNoSuchService) {
		t.Errorf("missing service: %v", err)
	}
	if out, err := run(t, "--timeout", env); err != nil || out != "Timeout (tcp tcpfin udp): 900 120 300\n" {
		t.Errorf("--timeout: %v %q", err, out)
	}
	// JSON sorts numerically.
	out, err = run(t, "-o json", env)
	var doc JSONTable
	if err != nil || json.Unmarshal([]byte(out), &doc) != nil || len(doc.Services) != 2 || doc.Services[0].Address != "10.0.0.1" {
		t.Errorf("-o json: %v\n%s", err, out)
	}
	if out, err := run(t, "--timeout -o json", env); err != nil || out != "{\n  \"tcp\": 900,\n  \"tcpfin\": 120,\n  \"udp\": 300\n}\n" {
		t.Errorf("--timeout -o json: %v %q", err, out)
	}
	// --services asks the daemon.
	env.Owners = func(addr string) (Owners, error) {
		if addr != "127.0.0.1:1" {
			t.Errorf("metrics address %q", addr)
		}
		return Owners{r.entries[0].Service.ServiceKey: {{Namespace: "ns", Name: "web", Port: "http"}}}, nil
	}
	const wantServices = "IP Virtual Server version 1.2.1 (size=4096)\n" +
		"Prot LocalAddress:Port Scheduler Flags\n" +
		"  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn\n" +
		"TCP  200.0.0.1:80 rr\n" +
		"TCP  10.0.0.1:80 rr  # ns/web:http\n"
	if out, err := run(t, "-Ln --services --metrics-address 127.0.0.1:1", env); err != nil || out != wantServices {
		t.Errorf("--services: %v\n%s\nwant:\n%s", err, out, wantServices)
	}
	env.Owners = func(string) (Owners, error) { return nil, errors.New("connection refused") }
	if _, err := run(t, "-Ln --services", env); err == nil || !strings.Contains(err.Error(), "--services: connection refused") {
		t.Errorf("--services without daemon: %v", err)
	}
	// -c reads the connection table, not IPVS.
	conns := "Pro FromIP   FPrt ToIP     TPrt DestIP   DPrt State       Expires PEName PEData\n" +
		"TCP 0A000064 8300 0A000064 0050 0A010002 1F90 ESTABLISHED     890\n"
	env = Env{OpenConns: func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(conns)), nil }}
	out, err = run(t, "-Lnc", env)
	want := "IPVS connection entries\npro expire state       source             virtual            destination\n" +
		"TCP 14:50  ESTABLISHED 10.0.0.100:33536   10.0.0.100:80      10.1.0.2:8080\n"
	if err != nil || out != want {
		t.Errorf("-Lnc: %v\n%q\nwant\n%q", err, out, want)
	}
	out, err = run(t, "-c -o json", env)
	if err != nil || !strings.Contains(out, `"client": "10.0.0.100:33536"`) || !strings.Contains(out, `"expires": 890`) {
		t.Errorf("-c -o json: %v\n%s", err, out)
	}
	env.OpenConns = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("header\nTCP short\n")), nil }
	if _, err := run(t, "-c", env); err == nil || !strings.Contains(err.Error(), "fields") {
		t.Errorf("malformed table: %v", err)
	}
}
