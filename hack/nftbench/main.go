// Command nftbench measures the two ways kipvs's nftables backend could drive nf_tables on
// the same table, in one run: sigs.k8s.io/knftables (text transactions run by the nft
// program; what kipvs uses) and github.com/google/nftables (netlink from Go, no program).
// For each it times a first sync of N Services (a table with a concatenated
// address . protocol . port set of N elements and an address set of N elements, in one
// transaction), one change (one element added to each set), and a read of both sets.
//
// Run it as root in a network namespace of its own: `unshare -n go run . -n 10000`
// (make nftbench). It deletes its table between rounds and at the end.
package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"time"

	gnft "github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"sigs.k8s.io/knftables"
)

const table = "nftbench"

// chunk is how many elements one message adds (google/nftables sends one message per call).
const chunk = 1000

func main() {
	n := flag.Int("n", 10000, "Services (elements per set)")
	rounds := flag.Int("rounds", 3, "rounds per library")
	flag.Parse()
	ctx := context.Background()
	k, err := knftables.New(knftables.IPv4Family, table)
	if err != nil {
		fail(err)
	}
	// The whole first sync is one batch, sent in one sendmsg: the socket's send buffer must
	// hold it (the default, net.core.wmem_default, is about 200 KB).
	g, err := gnft.New(gnft.AsLasting(), gnft.WithSockOptions(func(c *netlink.Conn) error { return c.SetWriteBuffer(64 << 20) }))
	if err != nil {
		fail(err)
	}
	fmt.Printf("%d Services x 2 sets, %d rounds (median shown)\n", *n, *rounds)
	fmt.Printf("%-10s %12s %12s %12s\n", "library", "first sync", "one change", "read sets")
	for _, lib := range []struct {
		name string
		run  func(n int) (first, change, read time.Duration, err error)
	}{
		{"knftables", func(n int) (time.Duration, time.Duration, time.Duration, error) { return knft(ctx, k, n) }},
		{"google", func(n int) (time.Duration, time.Duration, time.Duration, error) { return google(g, n) }},
	} {
		var fs, cs, rs []time.Duration
		for range *rounds {
			f, c, r, err := lib.run(*n)
			cleanup(ctx, k)
			if err != nil {
				fail(fmt.Errorf("%s: %w", lib.name, err))
			}
			fs, cs, rs = append(fs, f), append(cs, c), append(rs, r)
		}
		fmt.Printf("%-10s %12s %12s %12s\n", lib.name, median(fs), median(cs), median(rs))
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "nftbench:", err)
	os.Exit(1)
}

func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2].Round(100 * time.Microsecond)
}

func cleanup(ctx context.Context, k knftables.Interface) {
	tx := k.NewTransaction()
	tx.Add(&knftables.Table{})
	tx.Delete(&knftables.Table{})
	_ = k.Run(ctx, tx)
}

// vip is the i-th Service's cluster IP.
func vip(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)})
}

func knft(ctx context.Context, k knftables.Interface, n int) (first, change, read time.Duration, err error) {
	fill := func(tx *knftables.Transaction, from, to int) {
		for i := from; i < to; i++ {
			tx.Add(&knftables.Element{Set: "cluster-ip", Key: []string{vip(i).String(), "tcp", "80"}})
			tx.Add(&knftables.Element{Set: "ipvs-ips", Key: []string{vip(i).String()}})
		}
	}
	start := time.Now()
	tx := k.NewTransaction()
	tx.Add(&knftables.Table{})
	tx.Add(&knftables.Set{Name: "cluster-ip", Type: "ipv4_addr . inet_proto . inet_service"})
	tx.Add(&knftables.Set{Name: "ipvs-ips", Type: "ipv4_addr"})
	fill(tx, 0, n)
	if err = k.Run(ctx, tx); err != nil {
		return
	}
	first = time.Since(start)
	start = time.Now()
	tx = k.NewTransaction()
	fill(tx, n, n+1)
	if err = k.Run(ctx, tx); err != nil {
		return
	}
	change = time.Since(start)
	start = time.Now()
	a, err := k.ListElements(ctx, "set", "cluster-ip")
	if err != nil {
		return
	}
	b, err := k.ListElements(ctx, "set", "ipvs-ips")
	if err != nil {
		return
	}
	read = time.Since(start)
	if len(a) != n+1 || len(b) != n+1 {
		err = fmt.Errorf("read %d and %d elements, want %d", len(a), len(b), n+1)
	}
	return
}

func google(c *gnft.Conn, n int) (first, change, read time.Duration, err error) {
	t := &gnft.Table{Family: gnft.TableFamilyIPv4, Name: table}
	concat, err := gnft.ConcatSetType(gnft.TypeIPAddr, gnft.TypeInetProto, gnft.TypeInetService)
	if err != nil {
		return
	}
	cluster := &gnft.Set{Table: t, Name: "cluster-ip", KeyType: concat, Concatenation: true}
	ips := &gnft.Set{Table: t, Name: "ipvs-ips", KeyType: gnft.TypeIPAddr}
	elems := func(from, to int) (cl, ip []gnft.SetElement) {
		for i := from; i < to; i++ {
			a := vip(i).As4()
			// Each field of a concatenation takes a multiple of 4 bytes.
			key := make([]byte, 12)
			copy(key, a[:])
			key[4] = 6 // tcp
			binary.BigEndian.PutUint16(key[8:], 80)
			cl = append(cl, gnft.SetElement{Key: key})
			ip = append(ip, gnft.SetElement{Key: a[:]})
		}
		return
	}
	start := time.Now()
	c.AddTable(t)
	cl, ip := elems(0, n)
	if err = c.AddSet(cluster, nil); err != nil {
		return
	}
	if err = c.AddSet(ips, nil); err != nil {
		return
	}
	// One message of a batch holds at most a netlink page's worth: add the elements in
	// chunks, all in the same batch (one transaction).
	for i := 0; i < len(cl); i += chunk {
		j := min(i+chunk, len(cl))
		if err = c.SetAddElements(cluster, cl[i:j]); err != nil {
			return
		}
		if err = c.SetAddElements(ips, ip[i:j]); err != nil {
			return
		}
	}
	if err = c.Flush(); err != nil {
		return
	}
	first = time.Since(start)
	start = time.Now()
	cl, ip = elems(n, n+1)
	if err = c.SetAddElements(cluster, cl); err != nil {
		return
	}
	if err = c.SetAddElements(ips, ip); err != nil {
		return
	}
	if err = c.Flush(); err != nil {
		return
	}
	change = time.Since(start)
	start = time.Now()
	a, err := c.GetSetElements(cluster)
	if err != nil {
		return
	}
	b, err := c.GetSetElements(ips)
	if err != nil {
		return
	}
	read = time.Since(start)
	if len(a) != n+1 || len(b) != n+1 {
		err = fmt.Errorf("read %d and %d elements, want %d", len(a), len(b), n+1)
	}
	return
}
