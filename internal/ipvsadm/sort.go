package ipvsadm

import (
	"encoding/binary"
	"net/netip"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvs"
)

// ipvsadm sorts services and destinations with qsort(3) and comparators that subtract
// unsigned values and return the difference as a C int (libipvs ipvs_cmp_services and
// ipvs_cmp_dests). For addresses more than 2^31 apart the sign of that difference is the
// opposite of their numeric order, so the comparator is not a total order and the result
// depends on the sorting algorithm and on the input order (the kernel's dump order).
//
// glibc 2.36 (Debian 12) implements qsort in stdlib/msort.c as a top-down merge sort: it
// splits n elements into n/2 and n-n/2, sorts both halves recursively, then merges them,
// taking the left element whenever cmp(left, right) <= 0. Elements larger than 32 bytes
// (both ipvsadm entry types are) are sorted indirectly through an array of pointers, which
// changes nothing in the order of comparisons. It falls back to quicksort only when the
// temporary array would exceed a quarter of the physical memory, which ipvsadm's tables
// never approach. glibcMergeSort is that algorithm.

// glibcMergeSort sorts s in place exactly as glibc 2.36's qsort orders it with cmp.
func glibcMergeSort[T any](s []T, cmp func(a, b *T) int32) {
	if len(s) <= 1 {
		return
	}
	msort(s, make([]T, len(s)), cmp)
}

func msort[T any](b, tmp []T, cmp func(a, b *T) int32) {
	n := len(b)
	if n <= 1 {
		return
	}
	n1 := n / 2
	msort(b[:n1], tmp, cmp)
	msort(b[n1:], tmp, cmp)
	i, j, k := 0, n1, 0
	for i < n1 && j < n {
		if cmp(&b[i], &b[j]) <= 0 {
			tmp[k] = b[i]
			i++
		} else {
			tmp[k] = b[j]
			j++
		}
		k++
	}
	// The rest of the left run goes after the merged prefix; the rest of the right run
	// is already in place at the end of b.
	k += copy(tmp[k:], b[i:n1])
	copy(b, tmp[:k])
}

// C address families as ipvsadm compares them.
const (
	afInet  = 2
	afInet6 = 10
)

// sortKey is what ipvsadm's comparators look at, in host byte order: the address as four
// 32-bit words (an IPv4 address is the first word, the rest zero, as in union nf_inet_addr).
type sortKey struct {
	fwmark uint32
	af     uint16
	proto  uint16
	addr   [4]uint32
	port   uint16
}

func addrWords(k *sortKey, a netip.Addr) {
	if !a.IsValid() {
		return
	}
	a = a.Unmap()
	if a.Is4() {
		b := a.As4()
		k.addr[0] = binary.BigEndian.Uint32(b[:])
		return
	}
	b := a.As16()
	for i := range k.addr {
		k.addr[i] = binary.BigEndian.Uint32(b[4*i:])
	}
}

func serviceSortKey(s *ipvs.Service) sortKey {
	k := sortKey{fwmark: s.FWMark, af: cFamily(s.Family), port: s.Port}
	if s.FWMark == 0 {
		k.proto = uint16(s.Protocol)
		addrWords(&k, s.Addr)
	}
	return k
}

func destSortKey(d *ipvs.Destination) sortKey {
	k := sortKey{port: d.Port, af: cFamily(inet.FamilyOf(d.Addr))}
	addrWords(&k, d.Addr)
	return k
}

// cFamily maps a family to the C AF_* value ipvsadm compares.
func cFamily(f inet.Family) uint16 {
	switch f {
	case inet.IPv4:
		return afInet
	case inet.IPv6:
		return afInet6
	}
	return uint16(f)
}

// compareAddr is the address part of both comparators: the family of the first argument
// decides whether one word or all four are compared.
func compareAddr(a, b *sortKey) int32 {
	if a.af == afInet6 {
		var r int32
		for i := 0; r == 0 && i < 4; i++ {
			r = int32(a.addr[i] - b.addr[i])
		}
		return r
	}
	return int32(a.addr[0] - b.addr[0])
}

// cmpServices is libipvs's ipvs_cmp_services.
func cmpServices(a, b *sortKey) int32 {
	if r := int32(a.fwmark - b.fwmark); r != 0 {
		return r
	}
	if r := int32(a.af) - int32(b.af); r != 0 {
		return r
	}
	if r := int32(a.proto) - int32(b.proto); r != 0 {
		return r
	}
	if r := compareAddr(a, b); r != 0 {
		return r
	}
	return int32(a.port) - int32(b.port)
}

// cmpDests is libipvs's ipvs_cmp_dests.
func cmpDests(a, b *sortKey) int32 {
	if r := compareAddr(a, b); r != 0 {
		return r
	}
	return int32(a.port) - int32(b.port)
}

// ipvsadmSortServices orders entries as `ipvsadm -L` (without --nosort) lists them, given
// the kernel's dump order.
func ipvsadmSortServices(entries []ipvs.Entry) {
	type item struct {
		k sortKey
		e ipvs.Entry
	}
	items := make([]item, len(entries))
	for i := range entries {
		items[i] = item{serviceSortKey(&entries[i].Service), entries[i]}
	}
	glibcMergeSort(items, func(a, b *item) int32 { return cmpServices(&a.k, &b.k) })
	for i := range items {
		entries[i] = items[i].e
	}
}

// ipvsadmSortDests orders destinations as ipvsadm lists them, given the kernel's order.
func ipvsadmSortDests(dests []ipvs.Destination) {
	type item struct {
		k sortKey
		d ipvs.Destination
	}
	items := make([]item, len(dests))
	for i := range dests {
		items[i] = item{destSortKey(&dests[i]), dests[i]}
	}
	glibcMergeSort(items, func(a, b *item) int32 { return cmpDests(&a.k, &b.k) })
	for i := range items {
		dests[i] = items[i].d
	}
}
