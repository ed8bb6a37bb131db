package ipset_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipset"
	"github.com/kipvs/kipvs/internal/kerr"
)

// op is one step of the table applied to both the fake and the kernel. want is the error
// kind the step must give (nil: success).
type op struct {
	desc string
	run  func(ipset.Interface) error
	want error
}

// errWrongAnswer is returned by a Test step whose answer differs from the expected one.
var errWrongAnswer = errors.New("wrong answer")

// ent parses a member in ipset notation for a set of type t; it panics on a typo in a table.
func ent(t ipset.Type, s string) ipset.Entry {
	e, err := ipset.ParseEntry(t, s)
	if err != nil {
		panic(err)
	}
	return e
}

func ents(t ipset.Type, ss ...string) []ipset.Entry {
	out := make([]ipset.Entry, len(ss))
	for i, s := range ss {
		out[i] = ent(t, s)
	}
	return out
}

func create(s ipset.Set, want error) op {
	return op{fmt.Sprintf("create %s %s", s.Name, s.String()), func(i ipset.Interface) error { return i.Create(s) }, want}
}

func add(set string, t ipset.Type, member string, want error) op {
	return addEntry(set, ent(t, member), want)
}

func addEntry(set string, e ipset.Entry, want error) op {
	return op{fmt.Sprintf("add %s %s", set, e), func(i ipset.Interface) error { return i.Add(set, e) }, want}
}

func del(set string, t ipset.Type, member string, want error) op {
	e := ent(t, member)
	return op{fmt.Sprintf("del %s %s", set, e), func(i ipset.Interface) error { return i.Del(set, e) }, want}
}

func test(set string, t ipset.Type, member string, in bool) op {
	e := ent(t, member)
	return op{fmt.Sprintf("test %s %s (want %v)", set, e, in), func(i ipset.Interface) error {
		got, err := i.Test(set, e)
		if err != nil {
			return err
		}
		if got != in {
			return fmt.Errorf("test %s in %s = %v: %w", e, set, got, errWrongAnswer)
		}
		return nil
	}, nil}
}

func call(desc string, want error, fn func(ipset.Interface) error) op {
	return op{desc, fn, want}
}

const (
	clusterIP = "KUBE-CLUSTER-IP"
	loopBack  = "KUBE-LOOP-BACK"
	lbCIDR    = "KUBE-LOAD-BALANCER-SOURCE-CIDR"
	lbIP      = "KUBE-LOAD-BALANCER-SOURCE-IP"
	ipvsIPs   = "KUBE-IPVS-IPS"
	nodePort  = "KUBE-NODE-PORT-TCP"
	testNet   = "KIPVS-TEST-NET"
	testPorts = "KIPVS-TEST-PORTS"
	comments  = "KIPVS-TEST-COMMENT"
	full      = "KIPVS-TEST-FULL"
	swapA     = "KIPVS-TEST-SWAP-A"
	swapB     = "KIPVS-TEST-SWAP-B"
	extIP     = "KUBE-EXTERNAL-IP"
	v6Cluster = "KUBE-6-CLUSTER-IP"
	v6IPs     = "KUBE-6-IPVS-IPS"
	v6CIDR    = "KUBE-6-LOAD-BALANCER-SOURCE-CID" // upstream's 31-byte truncation
	missing   = "KIPVS-TEST-MISSING"
	batch     = "KIPVS-TEST-BATCH"
	batchFull = "KIPVS-TEST-BATCH-FULL"
)

func hashSet(name string, t ipset.Type, fam inet.Family) ipset.Set {
	return ipset.Set{Name: name, Type: t, Family: fam, HashSize: 1024, MaxElem: 65536}
}

// opTable exercises every set type kube-proxy uses, inet6, -exist semantics, member checks,
// ensure-create, swap, flush, destroy, Replace and the kernel's net matching.
func opTable() []op {
	H := ipset.HashIPPort
	cluster := hashSet(clusterIP, H, inet.IPv4)
	return []op{
		// hash:ip,port, ensure semantics of Create.
		create(cluster, nil),
		create(cluster, nil),
		create(ipset.Set{Name: clusterIP, Type: H}, nil), // defaults are upstream's values
		create(ipset.Set{Name: clusterIP, Type: H, HashSize: 4096}, nil),
		create(hashSet(clusterIP, ipset.HashIP, inet.IPv4), kerr.ErrExists),
		create(hashSet(clusterIP, H, inet.IPv6), kerr.ErrExists),
		create(ipset.Set{Name: clusterIP, Type: H, MaxElem: 1000}, kerr.ErrExists),
		create(ipset.Set{Name: clusterIP, Type: H, Comment: true}, kerr.ErrExists),
		add(clusterIP, H, "10.96.0.1,tcp:443", nil),
		add(clusterIP, H, "10.96.0.10,udp:53", nil),
		add(clusterIP, H, "10.96.0.10,tcp:53", nil),
		add(clusterIP, H, "10.96.0.20,sctp:9000", nil),
		add(clusterIP, H, "10.96.0.1,tcp:443", nil), // present: -exist
		del(clusterIP, H, "10.96.0.99,tcp:80", nil), // absent: -exist
		del(clusterIP, H, "10.96.0.20,sctp:9000", nil),
		add(clusterIP, H, "fd00::1,tcp:80", kerr.ErrInvalid),                                       // wrong family
		addEntry(clusterIP, ent(ipset.HashIP, "10.96.0.2"), kerr.ErrInvalid),                       // no port
		addEntry(clusterIP, ent(ipset.HashIPPortIP, "10.96.0.2,tcp:80,10.0.0.1"), kerr.ErrInvalid), // extra part
		addEntry(clusterIP, ipset.Entry{IP: ent(ipset.HashIP, "10.96.0.2").IP, Protocol: 1, Port: 8}, kerr.ErrInvalid),
		test(clusterIP, H, "10.96.0.1,tcp:443", true),
		test(clusterIP, H, "10.96.0.1,udp:443", false),
		test(clusterIP, H, "10.96.0.20,sctp:9000", false),
		call("add several at once", nil, func(i ipset.Interface) error {
			return i.Add(clusterIP, ents(H, "10.96.0.30,tcp:80", "10.96.0.31,udp:8053")...)
		}),
		// One bad member is rejected on its own: the others in the batch are still added.
		call("add several with one bad member adds the others", kerr.ErrInvalid, func(i ipset.Interface) error {
			return i.Add(clusterIP, ent(H, "10.96.0.40,tcp:80"), ent(H, "fd00::40,tcp:80"), ent(H, "10.96.0.41,tcp:80"))
		}),
		test(clusterIP, H, "10.96.0.40,tcp:80", true),
		test(clusterIP, H, "10.96.0.41,tcp:80", true),
		call("delete several with one bad member deletes the others", kerr.ErrInvalid, func(i ipset.Interface) error {
			return i.Del(clusterIP, ent(H, "10.96.0.40,tcp:80"), ent(H, "fd00::40,tcp:80"), ent(H, "10.96.0.41,tcp:80"))
		}),
		test(clusterIP, H, "10.96.0.40,tcp:80", false),
		test(clusterIP, H, "10.96.0.41,tcp:80", false),

		// hash:ip,port,ip
		create(hashSet(loopBack, ipset.HashIPPortIP, inet.IPv4), nil),
		add(loopBack, ipset.HashIPPortIP, "10.244.1.5,tcp:8080,10.244.1.5", nil),
		add(loopBack, ipset.HashIPPortIP, "10.244.1.6,udp:53,10.244.1.6", nil),
		add(loopBack, ipset.HashIPPortIP, "10.244.1.6,udp:53,10.244.1.6", nil),
		test(loopBack, ipset.HashIPPortIP, "10.244.1.5,tcp:8080,10.244.1.5", true),
		test(loopBack, ipset.HashIPPortIP, "10.244.1.5,tcp:8080,10.244.1.6", false),
		create(hashSet(lbIP, ipset.HashIPPortIP, inet.IPv4), nil),
		add(lbIP, ipset.HashIPPortIP, "203.0.113.10,tcp:80,198.51.100.1", nil),

		// hash:ip,port,net: nets, host nets, unmasked input, /0, host matching.
		create(hashSet(lbCIDR, ipset.HashIPPortNet, inet.IPv4), nil),
		add(lbCIDR, ipset.HashIPPortNet, "203.0.113.10,tcp:80,192.0.2.0/24", nil),
		add(lbCIDR, ipset.HashIPPortNet, "203.0.113.10,tcp:80,198.51.100.7", nil),
		add(lbCIDR, ipset.HashIPPortNet, "203.0.113.10,tcp:80,198.51.100.8/32", nil),
		add(lbCIDR, ipset.HashIPPortNet, "203.0.113.10,tcp:80,10.1.2.3/16", nil), // stored as 10.1.0.0/16
		add(lbCIDR, ipset.HashIPPortNet, "203.0.113.10,tcp:80,0.0.0.0/0", kerr.ErrInvalid),
		call("a /0 in a batch is rejected alone", kerr.ErrInvalid, func(i ipset.Interface) error {
			return i.Add(lbCIDR, ents(ipset.HashIPPortNet, "203.0.113.11,tcp:80,192.0.2.0/24", "203.0.113.11,tcp:80,0.0.0.0/0", "203.0.113.11,tcp:80,198.51.100.9/32")...)
		}),
		test(lbCIDR, ipset.HashIPPortNet, "203.0.113.11,tcp:80,192.0.2.0/24", true),
		test(lbCIDR, ipset.HashIPPortNet, "203.0.113.11,tcp:80,198.51.100.9", true),
		// The kernel lists a host net without its length, and Entry.String prints it so:
		// that text is what reconcile compares desired members with.
		call("a host net lists as its bare address", nil, func(i ipset.Interface) error {
			return listsAs(i, lbCIDR, "203.0.113.10,tcp:80,198.51.100.8", "203.0.113.11,tcp:80,198.51.100.9")
		}),
		test(lbCIDR, ipset.HashIPPortNet, "203.0.113.10,tcp:80,192.0.2.77", true), // host inside a member net
		test(lbCIDR, ipset.HashIPPortNet, "203.0.113.10,tcp:81,192.0.2.77", false),
		test(lbCIDR, ipset.HashIPPortNet, "203.0.113.10,tcp:80,192.0.2.0/25", false), // a net is tested exactly
		test(lbCIDR, ipset.HashIPPortNet, "203.0.113.10,tcp:80,10.1.0.0/16", true),

		// hash:ip
		create(hashSet(ipvsIPs, ipset.HashIP, inet.IPv4), nil),
		add(ipvsIPs, ipset.HashIP, "10.96.0.1", nil),
		add(ipvsIPs, ipset.HashIP, "10.96.0.10", nil),
		add(ipvsIPs, ipset.HashIP, "203.0.113.10", nil),
		addEntry(ipvsIPs, ent(H, "10.96.0.1,tcp:80"), kerr.ErrInvalid),
		add(ipvsIPs, ipset.HashIP, "::1", kerr.ErrInvalid),

		// hash:net
		create(hashSet(testNet, ipset.HashNet, inet.IPv4), nil),
		add(testNet, ipset.HashNet, "10.1.0.0/16", nil),
		add(testNet, ipset.HashNet, "10.3.0.9", nil),
		add(testNet, ipset.HashNet, "10.4.0.0/32", nil),
		add(testNet, ipset.HashNet, "0.0.0.0/0", kerr.ErrInvalid),
		test(testNet, ipset.HashNet, "10.1.200.1", true),
		test(testNet, ipset.HashNet, "10.2.0.1", false),
		test(testNet, ipset.HashNet, "10.1.0.0/24", false),
		test(testNet, ipset.HashNet, "10.3.0.9", true),
		del(testNet, ipset.HashNet, "10.1.0.1", nil), // a host, not the /16: nothing to delete
		test(testNet, ipset.HashNet, "10.1.0.1", true),

		// bitmap:port
		create(ipset.Set{Name: nodePort, Type: ipset.BitmapPort}, nil),
		create(ipset.Set{Name: nodePort, Type: ipset.BitmapPort, PortFrom: 0, PortTo: 65535, Family: inet.IPv6}, nil),
		create(ipset.Set{Name: nodePort, Type: ipset.BitmapPort, PortFrom: 30000, PortTo: 32767}, kerr.ErrExists),
		create(ipset.Set{Name: nodePort, Type: ipset.BitmapPort, MaxElem: 10}, kerr.ErrInvalid),
		add(nodePort, ipset.BitmapPort, "30080", nil),
		add(nodePort, ipset.BitmapPort, "30443", nil),
		add(nodePort, ipset.BitmapPort, "0", nil),
		add(nodePort, ipset.BitmapPort, "65535", nil),
		add(nodePort, ipset.BitmapPort, "30080", nil),
		del(nodePort, ipset.BitmapPort, "31000", nil),
		del(nodePort, ipset.BitmapPort, "0", nil),
		addEntry(nodePort, ipset.Entry{Protocol: inet.TCP, Port: 80}, kerr.ErrInvalid),
		test(nodePort, ipset.BitmapPort, "30443", true),
		test(nodePort, ipset.BitmapPort, "30444", false),
		create(ipset.Set{Name: testPorts, Type: ipset.BitmapPort, PortFrom: 30000, PortTo: 32767}, nil),
		add(testPorts, ipset.BitmapPort, "30000", nil),
		add(testPorts, ipset.BitmapPort, "29999", kerr.ErrInvalid),

		// inet6 and the 31-byte name limit.
		create(hashSet(v6Cluster, H, inet.IPv6), nil),
		add(v6Cluster, H, "fd00:10:96::1,tcp:443", nil),
		add(v6Cluster, H, "2001:db8::a,udp:53", nil),
		add(v6Cluster, H, "10.96.0.1,tcp:443", kerr.ErrInvalid),
		add(v6Cluster, H, "::ffff:10.96.0.1,tcp:443", kerr.ErrInvalid),
		test(v6Cluster, H, "fd00:10:96::1,tcp:443", true),
		create(hashSet(v6IPs, ipset.HashIP, inet.IPv6), nil),
		add(v6IPs, ipset.HashIP, "fd00:10:96::1", nil),
		add(v6IPs, ipset.HashIP, "2001:db8:0:0:1::1", nil),
		create(hashSet(v6CIDR+"R", ipset.HashIPPortNet, inet.IPv6), kerr.ErrInvalid), // 32 bytes
		create(hashSet(v6CIDR, ipset.HashIPPortNet, inet.IPv6), nil),
		add(v6CIDR, ipset.HashIPPortNet, "2001:db8::10,tcp:80,2001:db8:1::/48", nil),
		add(v6CIDR, ipset.HashIPPortNet, "2001:db8::10,tcp:80,2001:db8:2::5", nil),
		test(v6CIDR, ipset.HashIPPortNet, "2001:db8::10,tcp:80,2001:db8:1:ffff::1", true),
		call("a ::/0 in a batch is rejected alone", kerr.ErrInvalid, func(i ipset.Interface) error {
			return i.Add(v6CIDR, ents(ipset.HashIPPortNet, "2001:db8::11,tcp:80,::/0", "2001:db8::11,tcp:80,2001:db8:3::7/128")...)
		}),
		call("an IPv6 host net lists as its bare address", nil, func(i ipset.Interface) error {
			return listsAs(i, v6CIDR, "2001:db8::10,tcp:80,2001:db8:2::5", "2001:db8::11,tcp:80,2001:db8:3::7")
		}),

		// Comments.
		create(ipset.Set{Name: comments, Type: H, Comment: true}, nil),
		addEntry(comments, withComment(ent(H, "10.0.0.1,tcp:80"), "default/web"), nil),
		addEntry(comments, ent(H, "10.0.0.2,tcp:80"), nil),
		addEntry(comments, withComment(ent(H, "10.0.0.2,tcp:80"), "updated by -exist"), nil),
		addEntry(clusterIP, withComment(ent(H, "10.96.0.1,tcp:443"), "no comments here"), kerr.ErrInvalid),
		addEntry(comments, withComment(ent(H, "10.0.0.3,tcp:80"), `say "hi"`), kerr.ErrInvalid),

		// maxelem.
		create(ipset.Set{Name: full, Type: ipset.HashIP, MaxElem: 2}, nil),
		add(full, ipset.HashIP, "10.0.0.1", nil),
		add(full, ipset.HashIP, "10.0.0.2", nil),
		add(full, ipset.HashIP, "10.0.0.3", ipset.ErrFull),
		add(full, ipset.HashIP, "10.0.0.1", nil), // present: not "full"

		// Batches: the kernel adapter sends up to 256 members a request; more than that, of
		// every type, with comments, a delete with absent members, and a set that fills up
		// in the middle of a request (the members before the one refused are in, and the
		// error is the one refused's own).
		batchOf(ipset.Set{Name: batch, Type: ipset.HashIP}, 600, func(i int) string { return fmt.Sprintf("10.1.%d.%d", i/256, i%256) }),
		batchOf(ipset.Set{Name: batch, Type: ipset.HashIP, Family: inet.IPv6}, 300, func(i int) string { return fmt.Sprintf("fd00::1:%x", i) }),
		batchOf(ipset.Set{Name: batch, Type: ipset.HashNet}, 300, func(i int) string { return fmt.Sprintf("10.%d.%d.0/24", i/256, i%256) }),
		batchOf(ipset.Set{Name: batch, Type: H}, 300, func(i int) string {
			return fmt.Sprintf("10.1.%d.%d,%s:%d", i/256, i%256, []string{"tcp", "udp", "sctp"}[i%3], 80+i)
		}),
		batchOf(ipset.Set{Name: batch, Type: H, Comment: true}, 300, func(i int) string { return fmt.Sprintf("10.1.%d.%d,tcp:80", i/256, i%256) }),
		batchOf(ipset.Set{Name: batch, Type: ipset.HashIPPortIP}, 300, func(i int) string {
			return fmt.Sprintf("10.1.%d.%d,tcp:80,10.2.%d.%d", i/256, i%256, i%256, i/256)
		}),
		batchOf(ipset.Set{Name: batch, Type: ipset.HashIPPortNet, Family: inet.IPv6}, 300, func(i int) string {
			return fmt.Sprintf("2001:db8::%x,udp:53,2001:db8:%x::/%d", i, i, 48+i%16)
		}),
		batchOf(ipset.Set{Name: batch, Type: ipset.BitmapPort, PortFrom: 30000, PortTo: 31999}, 300, func(i int) string { return fmt.Sprint(30000 + 3*i) }),
		create(ipset.Set{Name: batchFull, Type: ipset.HashIP, MaxElem: 300}, nil),
		call("add 400 members in one call to a set of maxelem 300", ipset.ErrFull, func(i ipset.Interface) error {
			err := i.Add(batchFull, generated(ipset.HashIP, 400, batchIPs)...)
			if err != nil && !strings.Contains(err.Error(), "10.1.1.44") { // the 301st
				return fmt.Errorf("the error does not name the member refused: %w (%w)", err, errWrongAnswer)
			}
			return err
		}),
		call("the first 300 are in", nil, func(i ipset.Interface) error {
			return listsExactly(i, batchFull, generated(ipset.HashIP, 300, batchIPs))
		}),
		call("destroy the full batch set", nil, func(i ipset.Interface) error { return i.Destroy(batchFull) }),

		// Swap, flush, destroy.
		create(hashSet(swapA, ipset.HashIP, inet.IPv4), nil),
		create(ipset.Set{Name: swapB, Type: ipset.HashIP, MaxElem: 100}, nil),
		add(swapA, ipset.HashIP, "192.0.2.1", nil),
		add(swapB, ipset.HashIP, "192.0.2.2", nil),
		add(swapB, ipset.HashIP, "192.0.2.3", nil),
		call("swap A B", nil, func(i ipset.Interface) error { return i.Swap(swapA, swapB) }),
		test(swapA, ipset.HashIP, "192.0.2.2", true),
		test(swapB, ipset.HashIP, "192.0.2.1", true),
		call("swap with a set of another type", kerr.ErrInvalid, func(i ipset.Interface) error { return i.Swap(swapA, clusterIP) }),
		call("swap with a set of another family", kerr.ErrInvalid, func(i ipset.Interface) error { return i.Swap(swapA, v6IPs) }),
		call("swap with a missing set", kerr.ErrNotFound, func(i ipset.Interface) error { return i.Swap(swapA, missing) }),
		call("swap a missing set", kerr.ErrNotFound, func(i ipset.Interface) error { return i.Swap(missing, swapA) }),
		call("flush B", nil, func(i ipset.Interface) error { return i.Flush(swapB) }),
		test(swapB, ipset.HashIP, "192.0.2.1", false),
		call("flush missing", kerr.ErrNotFound, func(i ipset.Interface) error { return i.Flush(missing) }),
		call("destroy B", nil, func(i ipset.Interface) error { return i.Destroy(swapB) }),
		call("destroy B again", kerr.ErrNotFound, func(i ipset.Interface) error { return i.Destroy(swapB) }),
		call("destroy a 32-byte name", kerr.ErrInvalid, func(i ipset.Interface) error { return i.Destroy(v6CIDR + "R") }),
		add(missing, ipset.HashIP, "10.0.0.1", kerr.ErrNotFound),
		del(missing, ipset.HashIP, "10.0.0.1", kerr.ErrNotFound),
		call("test in a missing set", kerr.ErrNotFound, func(i ipset.Interface) error { _, err := i.Test(missing, ipset.Entry{}); return err }),
		call("list a missing set", kerr.ErrNotFound, func(i ipset.Interface) error { _, err := i.List(missing); return err }),

		// Replace: existing set, new set, identical content, header change, mismatches.
		call("replace cluster ip", nil, func(i ipset.Interface) error {
			return i.Replace(cluster, ents(H, "10.96.0.1,tcp:443", "10.96.0.10,udp:53", "10.96.0.50,tcp:8443", "10.96.0.50,tcp:8443"))
		}),
		call("replace cluster ip again, unchanged", nil, func(i ipset.Interface) error {
			return i.Replace(cluster, ents(H, "10.96.0.50,tcp:8443", "10.96.0.10,udp:53", "10.96.0.1,tcp:443"))
		}),
		call("replace a new set", nil, func(i ipset.Interface) error {
			return i.Replace(hashSet(extIP, H, inet.IPv4), ents(H, "198.51.100.20,tcp:80"))
		}),
		call("replace with an empty content", nil, func(i ipset.Interface) error {
			return i.Replace(hashSet(swapA, ipset.HashIP, inet.IPv4), nil)
		}),
		call("replace changes the port range", nil, func(i ipset.Interface) error {
			return i.Replace(ipset.Set{Name: testPorts, Type: ipset.BitmapPort, PortFrom: 30000, PortTo: 30100}, ents(ipset.BitmapPort, "30001"))
		}),
		call("replace with another type", kerr.ErrExists, func(i ipset.Interface) error {
			return i.Replace(hashSet(ipvsIPs, H, inet.IPv4), nil)
		}),
		call("replace with another family", kerr.ErrExists, func(i ipset.Interface) error {
			return i.Replace(hashSet(ipvsIPs, ipset.HashIP, inet.IPv6), nil)
		}),
		call("replace with a bad member", kerr.ErrInvalid, func(i ipset.Interface) error {
			return i.Replace(cluster, ents(H, "10.96.0.1,tcp:443", "fd00::1,tcp:443"))
		}),
		call("replace a comment set", nil, func(i ipset.Interface) error {
			return i.Replace(ipset.Set{Name: comments, Type: H, Comment: true},
				[]ipset.Entry{withComment(ent(H, "10.0.0.9,udp:9"), "replaced"), ent(H, "10.0.0.1,tcp:80")})
		}),
		call("no temporary set is left", nil, func(i ipset.Interface) error {
			names, err := i.ListNames()
			if err != nil {
				return err
			}
			for _, n := range names {
				if strings.HasPrefix(n, ipset.TempPrefix) {
					return fmt.Errorf("leftover %s: %w", n, errWrongAnswer)
				}
			}
			return nil
		}),
	}
}

// listsAs checks that List reports each of the members, printed by Entry.String, exactly as
// given (ipset notation, as the kernel lists them).
func listsAs(i ipset.Interface, set string, members ...string) error {
	info, err := i.List(set)
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, e := range info.Entries {
		have[e.String()] = true
	}
	for _, m := range members {
		if !have[m] {
			return fmt.Errorf("list %s: no member printed as %q in %q: %w", set, m, info.Entries, errWrongAnswer)
		}
	}
	return nil
}

// batchIPs is the i-th member of the maxelem batch.
func batchIPs(i int) string { return fmt.Sprintf("10.1.%d.%d", i/256, i%256) }

// generated is n members of a set of type t, the i-th printed by member(i).
func generated(t ipset.Type, n int, member func(int) string) []ipset.Entry {
	out := make([]ipset.Entry, n)
	for i := range out {
		out[i] = ent(t, member(i))
	}
	return out
}

// batchOf creates set s, adds n members (printed by member) in one call, checks that the
// set lists exactly them, deletes them and n/2 absent ones in one call, checks that it is
// empty, and destroys it: one step, so that the golden dump stays small.
func batchOf(s ipset.Set, n int, member func(int) string) op {
	return call(fmt.Sprintf("batch of %d in %s", n, s.String()), nil, func(i ipset.Interface) error {
		es := generated(s.Type, n+n/2, member)
		if s.Comment {
			for j := range es {
				es[j].Comment = fmt.Sprintf("default/svc-%d", j)
			}
		}
		if err := i.Create(s); err != nil {
			return err
		}
		if err := i.Add(s.Name, es[:n]...); err != nil {
			return err
		}
		if err := listsExactly(i, s.Name, es[:n]); err != nil {
			return err
		}
		if err := i.Del(s.Name, es...); err != nil {
			return err
		}
		if err := listsExactly(i, s.Name, nil); err != nil {
			return err
		}
		return i.Destroy(s.Name)
	})
}

// listsExactly checks that set lists the members es and no other, comments included.
func listsExactly(i ipset.Interface, set string, es []ipset.Entry) error {
	info, err := i.List(set)
	if err != nil {
		return err
	}
	want := map[string]string{}
	for _, e := range es {
		want[e.String()] = e.Comment
	}
	if len(info.Entries) != len(want) {
		return fmt.Errorf("list %s: %d members, want %d: %w", set, len(info.Entries), len(want), errWrongAnswer)
	}
	for _, e := range info.Entries {
		if c, ok := want[e.String()]; !ok || c != e.Comment {
			return fmt.Errorf("list %s: member %q (comment %q) not among the %d added: %w", set, e.String(), e.Comment, len(want), errWrongAnswer)
		}
	}
	return nil
}

func withComment(e ipset.Entry, c string) ipset.Entry {
	e.Comment = c
	return e
}

// applyOps runs the table on impl, checking each step's error kind.
func applyOps(t *testing.T, impl ipset.Interface) {
	t.Helper()
	for n, o := range opTable() {
		err := o.run(impl)
		switch {
		case o.want == nil && err != nil:
			t.Errorf("step %d %s: unexpected error: %v", n, o.desc, err)
		case o.want != nil && !errors.Is(err, o.want):
			t.Errorf("step %d %s: got error %v, want %v", n, o.desc, err, o.want)
		}
	}
}

// testdata locates a file under this package's testdata directory, also when the test binary
// runs elsewhere (the kernel-test VM starts it in its build directory).
func testdata(name string) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return filepath.Join("testdata", name)
	}
	return filepath.Join(filepath.Dir(file), "testdata", name)
}

// lineDiff lists the lines only in want (-) and only in got (+).
func lineDiff(want, got string) string {
	count := func(s string) map[string]int {
		m := map[string]int{}
		for _, l := range strings.Split(s, "\n") {
			m[l]++
		}
		return m
	}
	w, g := count(want), count(got)
	var b strings.Builder
	for _, l := range strings.Split(want, "\n") {
		if g[l] == 0 {
			fmt.Fprintf(&b, "- %s\n", l)
		}
	}
	for _, l := range strings.Split(got, "\n") {
		if w[l] == 0 {
			fmt.Fprintf(&b, "+ %s\n", l)
		}
	}
	if b.Len() == 0 {
		return "(same lines, different order or count)\n--- want\n" + want + "--- got\n" + got
	}
	return b.String()
}
