package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/kipvs/kipvs/internal/debugapi"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/ipvsadm"
	"github.com/kipvs/kipvs/internal/server"
)

func TestStatusHelpAndUsage(t *testing.T) {
	for _, args := range [][]string{{"status", "--help"}, {"ipvsadm", "-h"}} {
		var out bytes.Buffer
		root := newRootCommand()
		root.SetOut(&out)
		root.SetArgs(args)
		if err := root.Execute(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		for _, want := range []string{"--persistent-conn", "never resolves", "--services", "-o, --output json"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%v: help lacks %q", args, want)
			}
		}
	}
	root := newRootCommand()
	root.SetOut(&bytes.Buffer{})
	root.SetArgs([]string{"status", "-A", "-t", "10.0.0.1:80"})
	if err := root.Execute(); err == nil || !strings.Contains(err.Error(), "kipvs status only lists") {
		t.Errorf("an edit option: %v", err)
	}
}

func TestFetchOwners(t *testing.T) {
	list := debugapi.VirtualServerList{Items: []debugapi.VirtualServer{
		{Protocol: "TCP", Address: "10.96.0.1", Port: 443, Kind: "ClusterIP", Namespace: "default", Name: "kubernetes", PortName: "https"},
		{Protocol: "UDP", Address: "fd00::a", Port: 53, Kind: "ClusterIP", Namespace: "kube-system", Name: "dns", PortName: "dns"},
	}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != debugapi.VirtualServersPath {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(list)
	}))
	defer srv.Close()
	owners, err := fetchOwners(strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	k, _ := ipvs.ServiceKey{Protocol: inet.UDP, Addr: netip.MustParseAddr("fd00::a"), Port: 53}.Normalize()
	if got := owners[k]; len(got) != 1 || got[0] != (ipvsadm.Owner{Namespace: "kube-system", Name: "dns", Port: "dns", Kind: "ClusterIP"}) {
		t.Errorf("owners[%s] = %+v", k, got)
	}
	if len(owners) != 2 {
		t.Errorf("owners = %+v", owners)
	}

	list.Items[0].Protocol = "ICMP"
	if _, err := fetchOwners(strings.TrimPrefix(srv.URL, "http://")); err == nil || !strings.Contains(err.Error(), "items[0].protocol") {
		t.Errorf("bad protocol: %v", err)
	}
	srv.Close()
	off := http.NewServeMux()
	server.HandleDebug(off, false, nil, nil)
	offSrv := httptest.NewServer(off)
	defer offSrv.Close()
	if _, err := fetchOwners(strings.TrimPrefix(offSrv.URL, "http://")); err == nil || !strings.Contains(err.Error(), "--kipvs-debug-endpoints") {
		t.Errorf("debug endpoints off: %v, want the flag that turns them on", err)
	}
	if _, err := fetchOwners(strings.TrimPrefix(srv.URL, "http://")); err == nil || !strings.Contains(err.Error(), "is kipvs run serving metrics") {
		t.Errorf("no daemon: %v", err)
	}
}

func TestExitCode(t *testing.T) {
	// ipvsadm exits 2 for options that conflict and 255 for an option its parser rejects.
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"status", "-L", "-S"}, 2},
		{[]string{"status", "-Ln", "--bogus"}, 255},
		{[]string{"status", "-Ln", "-t"}, 255},
	} {
		root := newRootCommand()
		root.SetOut(&bytes.Buffer{})
		root.SetErr(&bytes.Buffer{})
		root.SetArgs(tc.args)
		if err := root.Execute(); err == nil || exitCode(err) != tc.want {
			t.Errorf("%v: %v, exit %d; want a usage error, exit %d as ipvsadm", tc.args, err, exitCode(err), tc.want)
		}
	}
	if c := exitCode(errors.New("open IPVS: protocol not supported")); c != 1 {
		t.Errorf("a runtime error: exit %d, want 1", c)
	}
}
