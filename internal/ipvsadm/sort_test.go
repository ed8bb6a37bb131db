package ipvsadm

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvs"
)

// A reference of glibc 2.36's msort_with_tmp written independently of glibcMergeSort
// (index arithmetic on a copy, as the C code moves bytes): both must agree, and the result
// must equal a stable sort whenever the comparator is a total order.
func refMergeSort(s []int, cmp func(a, b int) int32) []int {
	if len(s) <= 1 {
		return slices.Clone(s)
	}
	n1 := len(s) / 2
	left := refMergeSort(s[:n1], cmp)
	right := refMergeSort(s[n1:], cmp)
	out := make([]int, 0, len(s))
	for len(left) > 0 && len(right) > 0 {
		if cmp(left[0], right[0]) <= 0 {
			out, left = append(out, left[0]), left[1:]
		} else {
			out, right = append(out, right[0]), right[1:]
		}
	}
	out = append(out, left...)
	return append(out, right...)
}

func TestGlibcMergeSortMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	// A comparator like ipvsadm's: unsigned subtraction cast to int32.
	cmp := func(a, b int) int32 { return int32(uint32(a) - uint32(b)) }
	for n := 0; n < 200; n++ {
		in := make([]int, n)
		for i := range in {
			in[i] = int(r.Uint32())
		}
		want := refMergeSort(in, cmp)
		got := slices.Clone(in)
		glibcMergeSort(got, func(a, b *int) int32 { return cmp(*a, *b) })
		if !slices.Equal(got, want) {
			t.Fatalf("n=%d: got %v, want %v", n, got, want)
		}
	}
	// With a total order it is a stable sort.
	type kv struct{ k, v int }
	in := make([]kv, 500)
	for i := range in {
		in[i] = kv{r.IntN(20), i}
	}
	got := slices.Clone(in)
	glibcMergeSort(got, func(a, b *kv) int32 { return int32(a.k - b.k) })
	want := slices.Clone(in)
	slices.SortStableFunc(want, func(a, b kv) int { return a.k - b.k })
	if !slices.Equal(got, want) {
		t.Fatal("not a stable sort under a total order")
	}
}

func svcEntry(p inet.Protocol, addr string, port uint16) ipvs.Entry {
	a := netip.MustParseAddr(addr)
	return ipvs.Entry{Service: ipvs.Service{ServiceKey: ipvs.ServiceKey{Family: inet.FamilyOf(a), Protocol: p, Addr: a, Port: port}}}
}

func keys(es []ipvs.Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Service.ServiceKey.String())
	}
	return out
}

// The comparator quirk: 10.0.0.1 - 200.0.0.1 is 0x42000000 > 0 as an int32 difference
// (the addresses are more than 2^31 apart), so 200.x sorts before 10.x, and the result
// depends on the input order because the order is not transitive.
func TestIpvsadmServiceOrder(t *testing.T) {
	tests := []struct {
		name string
		in   []ipvs.Entry
		want []string
	}{
		{"near addresses numeric",
			[]ipvs.Entry{svcEntry(inet.TCP, "10.0.0.2", 80), svcEntry(inet.TCP, "10.0.0.1", 80), svcEntry(inet.TCP, "10.0.0.1", 79)},
			[]string{"TCP 10.0.0.1:79", "TCP 10.0.0.1:80", "TCP 10.0.0.2:80"}},
		{"far addresses backwards",
			[]ipvs.Entry{svcEntry(inet.TCP, "10.0.0.1", 80), svcEntry(inet.TCP, "200.0.0.1", 80)},
			[]string{"TCP 200.0.0.1:80", "TCP 10.0.0.1:80"}},
		// a=10.0.0.1 < b=100.0.0.1 < c=200.0.0.1 pairwise (each less than 2^31 apart) but
		// c < a: a cycle. The merge order decides.
		{"cycle input abc",
			[]ipvs.Entry{svcEntry(inet.TCP, "10.0.0.1", 1), svcEntry(inet.TCP, "100.0.0.1", 1), svcEntry(inet.TCP, "200.0.0.1", 1)},
			// msort: [a] | [b c] -> [b c] sorted (b<c) -> merge a vs b: a<b take a; then b, c.
			[]string{"TCP 10.0.0.1:1", "TCP 100.0.0.1:1", "TCP 200.0.0.1:1"}},
		{"cycle input cab",
			[]ipvs.Entry{svcEntry(inet.TCP, "200.0.0.1", 1), svcEntry(inet.TCP, "10.0.0.1", 1), svcEntry(inet.TCP, "100.0.0.1", 1)},
			// [c] | [a b] -> [a b]; merge c vs a: c<a take c; then a, b.
			[]string{"TCP 200.0.0.1:1", "TCP 10.0.0.1:1", "TCP 100.0.0.1:1"}},
		{"protocol then family then fwmark",
			[]ipvs.Entry{
				{Service: ipvs.Service{ServiceKey: ipvs.ServiceKey{Family: inet.IPv4, FWMark: 3}}},
				svcEntry(inet.SCTP, "10.0.0.1", 1), svcEntry(inet.UDP, "10.0.0.1", 1),
				svcEntry(inet.TCP, "fd00::1", 1), svcEntry(inet.TCP, "10.0.0.1", 1),
			},
			[]string{"TCP 10.0.0.1:1", "UDP 10.0.0.1:1", "SCTP 10.0.0.1:1", "TCP [fd00::1]:1", "FWM 3"}},
		// fwmarks subtract too: 3000000000 - 1 is negative as an int32.
		{"fwmark far apart",
			[]ipvs.Entry{
				{Service: ipvs.Service{ServiceKey: ipvs.ServiceKey{Family: inet.IPv4, FWMark: 1}}},
				{Service: ipvs.Service{ServiceKey: ipvs.ServiceKey{Family: inet.IPv4, FWMark: 3000000000}}},
			},
			[]string{"FWM 3000000000", "FWM 1"}},
		{"IPv6 word by word",
			[]ipvs.Entry{svcEntry(inet.TCP, "fd00::2", 1), svcEntry(inet.TCP, "fd00::1", 1), svcEntry(inet.TCP, "2001:db8::1", 1)},
			// fd00:: - 2001:db8:: in the first word: 0xfd000000-0x20010db8 = 0xdcfef248 < 0 as int32.
			[]string{"TCP [fd00::1]:1", "TCP [fd00::2]:1", "TCP [2001:db8::1]:1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.in)
			ipvsadmSortServices(in)
			if got := keys(in); !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestIpvsadmDestOrder(t *testing.T) {
	d := func(addr string, port uint16) ipvs.Destination {
		return ipvs.Destination{Addr: netip.MustParseAddr(addr), Port: port}
	}
	in := []ipvs.Destination{d("192.168.1.1", 80), d("10.0.0.1", 81), d("10.0.0.1", 80), d("1.0.0.1", 80)}
	ipvsadmSortDests(in)
	var got []string
	for _, x := range in {
		got = append(got, x.AddrPort().String())
	}
	// 192.168.1.1 - 10.0.0.1 = 0xb6a80100 < 0: 192.168 sorts first; 192.168.1.1 - 1.0.0.1 = 0xbfa80100 < 0 too.
	want := []string{"192.168.1.1:80", "1.0.0.1:80", "10.0.0.1:80", "10.0.0.1:81"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
