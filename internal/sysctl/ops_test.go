package sysctl_test

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/kipvs/kipvs/internal/kerr"
	"github.com/kipvs/kipvs/internal/sysctl"
)

// This file holds the operation table shared by the fake, the real implementation on a
// temporary directory (both in sysctl_test.go) and the real implementation on the kernel's
// /proc/sys in a fresh network namespace (sysctl_kernel_test.go). Every run starts from
// baseline and produces a transcript that must equal testdata/ops.golden.

// dotIface is an interface whose name has a dot, as VLAN interfaces do.
const dotIface = "kp.1"

// baseline is the starting state: keys kube-proxy's IPVS mode sets (the vs/ ones exist
// only with ip_vs loaded), a vector value and a per-interface key of dotIface.
func baseline() map[string]string {
	return map[string]string{
		"net/ipv4/ip_forward":                         "0",
		"net/ipv4/vs/conntrack":                       "0",
		"net/ipv4/vs/expire_nodest_conn":              "0",
		"net/ipv4/vs/expire_quiescent_template":       "0",
		"net/ipv4/conf/all/arp_ignore":                "0",
		"net/ipv4/conf/all/arp_announce":              "0",
		"net/ipv4/conf/" + dotIface + "/rp_filter":    "0",
		"net/ipv4/ip_local_port_range":                "32768\t60999",
		"net/ipv4/conf/" + dotIface + "/arp_announce": "0",
	}
}

type step struct {
	op, key, value string
}

func get(key string) step        { return step{"get", key, ""} }
func set(key, value string) step { return step{"set", key, value} }

func opTable() []step {
	return []step{
		get("net.ipv4.ip_forward"),
		get("net/ipv4/ip_forward"),
		set("net.ipv4.ip_forward", "1"),
		set("net/ipv4/ip_forward", "1"),
		set("net.ipv4.vs.conntrack", " 1\n"),
		get("net.ipv4.vs.conntrack"),
		set("net.ipv4.vs.expire_nodest_conn", "1"),
		set("net.ipv4.vs.expire_quiescent_template", "1"),
		set("net.ipv4.conf.all.arp_ignore", "1"),
		set("net/ipv4/conf/all/arp_announce", "2"),
		// A dot in an interface name: '/' for it in dotted form, literal in slash form.
		get("net.ipv4.conf.kp/1.rp_filter"),
		set("net.ipv4.conf.kp/1.rp_filter", "2"),
		get("net/ipv4/conf/kp.1/rp_filter"),
		set("net/ipv4/conf/kp.1/arp_announce", "1"),
		get("net.ipv4.conf.kp/1.arp_announce"),
		get("net.ipv4.conf.kp.1.rp_filter"),
		set("net.ipv4.conf.kp.1.rp_filter", "1"),
		// Vector values: whitespace is normalised.
		get("net.ipv4.ip_local_port_range"),
		set("net.ipv4.ip_local_port_range", "20000\t30000"),
		set("net.ipv4.ip_local_port_range", "20000   30000\n"),
		get("net/ipv4/ip_local_port_range"),
		// Missing keys, paths through a key, directories, malformed keys and values.
		get("net.ipv4.vs.no_such_key"),
		set("net/ipv4/vs/no_such_key", "1"),
		get("net.ipv4.ip_forward.x"),
		set("net/ipv4/ip_forward/x", "1"),
		get("net.ipv4.vs"),
		set("net/ipv4/vs", "1"),
		get(""),
		get("net..ipv4"),
		get("/net/ipv4/ip_forward"),
		get("net/ipv4/../ipv4/ip_forward"),
		get("net.ipv4./.ip_forward"),
		set("net.ipv4.ip_forward", ""),
		set("net.ipv4.ip_forward", " \n"),
		set("net.ipv4.ip_forward", "0"),
	}
}

// observer reads keys (slash form) independently of the implementation; it returns their
// normalised values in order.
type observer func(t *testing.T, paths []string) []string

// runOps applies the table to impl and returns the transcript, which ends with every
// baseline key's final value. observe, when not nil, must agree with impl on each of them.
func runOps(t *testing.T, impl sysctl.Interface, observe observer) string {
	t.Helper()
	var b strings.Builder
	for i, s := range opTable() {
		fmt.Fprintf(&b, "%02d %s %q", i, s.op, s.key)
		switch s.op {
		case "get":
			v, err := impl.Get(s.key)
			if err != nil {
				fmt.Fprintf(&b, ": %s\n", outcome(err))
				continue
			}
			fmt.Fprintf(&b, ": %q\n", v)
		case "set":
			old, changed, err := impl.Set(s.key, s.value)
			fmt.Fprintf(&b, " %q: ", s.value)
			if err != nil {
				fmt.Fprintf(&b, "%s\n", outcome(err))
				continue
			}
			fmt.Fprintf(&b, "old=%q changed=%t\n", old, changed)
		}
	}
	b.WriteString("final:\n")
	keys := slices.Sorted(maps.Keys(baseline()))
	var observed []string
	if observe != nil {
		observed = observe(t, keys)
		if len(observed) != len(keys) {
			t.Fatalf("read %d values independently for %d keys: %q", len(observed), len(keys), observed)
		}
	}
	for i, k := range keys {
		v, err := impl.Get(k)
		if err != nil {
			t.Errorf("Get(%s): %v", k, err)
		}
		if observe != nil && observed[i] != v {
			t.Errorf("%s: Get = %q, read independently %q", k, v, observed[i])
		}
		fmt.Fprintf(&b, "%s = %s\n", k, v)
	}
	return b.String()
}

// outcome names an error by its kerr type and errno, which real and fake share.
func outcome(err error) string {
	var kind string
	switch {
	case kerr.IsNotFound(err):
		kind = "not found"
	case kerr.IsExists(err):
		kind = "exists"
	case kerr.IsInvalid(err):
		kind = "invalid"
	case kerr.IsBusy(err):
		kind = "busy"
	default:
		kind = "untyped error"
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		kind += " " + unix.ErrnoName(errno)
	}
	return "error: " + kind
}

// writeTree creates the files of vals (slash-form keys) under root, as /proc/sys shows
// them (value and a newline).
func writeTree(t *testing.T, root string, vals map[string]string) {
	t.Helper()
	for k, v := range vals {
		p := filepath.Join(root, k)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// fileObserver reads the files under root directly.
func fileObserver(root string) observer {
	return func(t *testing.T, paths []string) []string {
		var out []string
		for _, p := range paths {
			b, err := os.ReadFile(filepath.Join(root, p))
			if err != nil {
				t.Errorf("read %s: %v", p, err)
			}
			out = append(out, sysctl.Normalize(string(b)))
		}
		return out
	}
}
