package bench

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// netlinkDir holds the recorded netlink answers (testdata/README.md).
const netlinkDir = "testdata/netlink"

// recordEnv set to 1 makes TestRecordNetlink record them.
const recordEnv = "KIPVS_BENCH_RECORD_NETLINK"

// answerFile is the file of the recorded answer to a request: rules of table's chain
// ("" for all), or elements of table's set.
func answerFile(kind, table, name string) string {
	if name == "" {
		name = "all"
	}
	return filepath.Join(netlinkDir, kind+"-"+table+"-"+url.PathEscape(name)+".bin")
}

// recorded answers with the recorded messages; a request not recorded is an error.
type recorded struct{}

func (recorded) read(file string) ([]netlink.Message, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("no recorded answer: %w", err)
	}
	return splitMessages(b)
}

func (r recorded) rules(table, chain string) ([]netlink.Message, error) {
	return r.read(answerFile("rules", table, chain))
}

func (r recorded) elems(table, set string) ([]netlink.Message, error) {
	return r.read(answerFile("elems", table, set))
}

func (r recorded) gen() ([]netlink.Message, error) {
	return r.read(filepath.Join(netlinkDir, "gen.bin"))
}

// recorder reads the kernel and keeps each answer's bytes by its file.
type recorder struct {
	src   nftSource
	files map[string][]byte
}

func (r recorder) keep(file string, msgs []netlink.Message, err error) ([]netlink.Message, error) {
	if err != nil {
		return nil, err
	}
	var b []byte
	for _, m := range msgs {
		mb, err := m.MarshalBinary()
		if err != nil {
			return nil, err
		}
		b = append(b, mb...)
	}
	r.files[file] = b
	return msgs, nil
}

func (r recorder) rules(table, chain string) ([]netlink.Message, error) {
	msgs, err := r.src.rules(table, chain)
	return r.keep(answerFile("rules", table, chain), msgs, err)
}

func (r recorder) elems(table, set string) ([]netlink.Message, error) {
	msgs, err := r.src.elems(table, set)
	return r.keep(answerFile("elems", table, set), msgs, err)
}

func (r recorder) gen() ([]netlink.Message, error) {
	msgs, err := r.src.gen()
	return r.keep(filepath.Join(netlinkDir, "gen.bin"), msgs, err)
}

const (
	nftChain0 = "service-AAAAAAAA-default/bench-00000/tcp/http"
	nftChain1 = "service-BBBBBBBB-default/bench-00001/tcp/http"
	iptChain0 = "KUBE-SVC-AAAAAAAAAAAAAAAA"
	iptChain1 = "KUBE-SVC-BBBBBBBBBBBBBBBB"
)

// reads makes the reads the tests check, in both modes, on src.
func reads(src nftSource) error {
	for mode, chains := range map[string][]string{"nftables": {nftChain0, nftChain1}, "iptables": {iptChain0, iptChain1}} {
		for _, read := range []func(*RuleReader) error{
			func(r *RuleReader) error { _, err := r.Programmed(); return err },
			func(r *RuleReader) error { _, err := r.VIPs(); return err },
			func(r *RuleReader) error {
				for _, c := range chains {
					if _, _, err := r.Endpoints(c); err != nil {
						return err
					}
				}
				return nil
			},
		} {
			r, err := newRuleReader(src, mode)
			if err != nil {
				return err
			}
			if err := read(r); err != nil {
				return fmt.Errorf("%s: %w", mode, err)
			}
		}
	}
	return nil
}

// TestRecordNetlink records testdata/netlink: as root, in a network namespace of its own
// with an empty ruleset (KIPVS_BENCH_RECORD_NETLINK=1 unshare -n go test -run
// TestRecordNetlink ./e2e/bench), it loads nft-table.nft and iptables-nat.rules and keeps
// the kernel's answers to the reads the tests make.
func TestRecordNetlink(t *testing.T) {
	if os.Getenv(recordEnv) != "1" {
		t.Skip(recordEnv + " is not 1")
	}
	out, err := exec.Command("nft", "list", "ruleset").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "" {
		t.Fatalf("want an empty ruleset (a fresh network namespace: unshare -n): %v\n%s", err, out)
	}
	for _, c := range [][]string{{"nft", "-f", "testdata/nft-table.nft"}, {"sh", "-c", "iptables-nft-restore < testdata/iptables-nat.rules"}} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(c, " "), err, out)
		}
	}
	conn, err := dialNFT()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rec := recorder{src: conn, files: map[string][]byte{}}
	if err := reads(rec); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(netlinkDir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(netlinkDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range slices.Sorted(maps.Keys(rec.files)) {
		if err := os.WriteFile(f, rec.files[f], 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d bytes", f, len(rec.files[f]))
	}
}

// Every read the tests make is recorded.
func TestRecordedReads(t *testing.T) {
	if err := reads(recorded{}); err != nil {
		t.Fatal(err)
	}
}

func reader(t *testing.T, src nftSource, mode string) *RuleReader {
	t.Helper()
	r, err := newRuleReader(src, mode)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestProgrammed(t *testing.T) {
	for mode, chains := range map[string][2]string{"nftables": {nftChain0, nftChain1}, "iptables": {iptChain0, iptChain1}} {
		t.Run(mode, func(t *testing.T) {
			p, err := reader(t, recorded{}, mode).Programmed()
			if err != nil {
				t.Fatal(err)
			}
			checkProgrammed(t, p, chains[0], chains[1])
		})
	}
}

// The first-sync polls read only the programmed cluster IPs: the service-ips map, the
// KUBE-SERVICES chain.
func TestVIPs(t *testing.T) {
	for mode, chains := range map[string][2]string{"nftables": {nftChain0, nftChain1}, "iptables": {iptChain0, iptChain1}} {
		t.Run(mode, func(t *testing.T) {
			got, err := reader(t, recorded{}, mode).VIPs()
			if err != nil {
				t.Fatal(err)
			}
			if want := map[VIP]string{vip0: chains[0], vip1: chains[1]}; !maps.Equal(got, want) {
				t.Errorf("VIPs %v, want %v", got, want)
			}
		})
	}
}

func TestEndpoints(t *testing.T) {
	for mode, chains := range map[string][2]string{"nftables": {nftChain0, nftChain1}, "iptables": {iptChain0, iptChain1}} {
		t.Run(mode, func(t *testing.T) {
			r := reader(t, recorded{}, mode)
			for i, want := range []map[netip.AddrPort]bool{eps0, eps1} {
				got, ok, err := r.Endpoints(chains[i])
				if err != nil || !ok {
					t.Fatalf("%s: %v, %v", chains[i], ok, err)
				}
				if !maps.Equal(got, want) {
					t.Errorf("%s: endpoints %v, want %v", chains[i], sortedKeys(got), sortedKeys(want))
				}
			}
			if len(r.dnat) != 4 {
				t.Errorf("%d endpoint chains' DNAT kept, want 4: %v", len(r.dnat), r.dnat)
			}
		})
	}
}

// edited answers rule dumps with its function, set element dumps as recorded.
type edited func(table, chain string) ([]netlink.Message, error)

func (e edited) rules(table, chain string) ([]netlink.Message, error) { return e(table, chain) }

func (e edited) elems(table, set string) ([]netlink.Message, error) {
	return recorded{}.elems(table, set)
}

func (e edited) gen() ([]netlink.Message, error) { return recorded{}.gen() }

// withoutDNAT answers every rule dump without the rules that DNAT to 10.128.0.2:8080.
func withoutDNAT(t *testing.T) nftSource {
	return edited(func(table, chain string) ([]netlink.Message, error) {
		msgs, err := recorded{}.rules(table, chain)
		if err != nil {
			return nil, err
		}
		var out []netlink.Message
		for _, m := range msgs {
			rs, err := decodeRules([]netlink.Message{m})
			if err != nil {
				return nil, err
			}
			if rs[0].dnat != netip.MustParseAddrPort("10.128.0.2:8080") {
				out = append(out, m)
			}
		}
		if len(out) == len(msgs) && (chain == "" || strings.Contains(chain, "E2")) {
			t.Errorf("no rule of %s %q DNATs to 10.128.0.2:8080", table, chain)
		}
		return out, nil
	})
}

// An endpoint chain without its DNAT is not a programmed endpoint.
func TestNoDNAT(t *testing.T) {
	for mode, chain := range map[string]string{"nftables": nftChain0, "iptables": iptChain0} {
		t.Run(mode, func(t *testing.T) {
			if _, err := reader(t, withoutDNAT(t), mode).Programmed(); err == nil || !strings.Contains(err.Error(), "no DNAT") {
				t.Errorf("Programmed without a DNAT: %v, want an error saying so", err)
			}
			if _, _, err := reader(t, withoutDNAT(t), mode).Endpoints(chain); err == nil || !strings.Contains(err.Error(), "no DNAT") {
				t.Errorf("Endpoints without a DNAT: %v, want an error saying so", err)
			}
		})
	}
}

// A chain with no rules is not there; a read that a commit came in the middle of is made
// again.
func TestEndpointsMissing(t *testing.T) {
	empty := edited(func(string, string) ([]netlink.Message, error) { return nil, nil })
	if _, ok, err := reader(t, empty, "nftables").Endpoints(nftChain0); ok || err != nil {
		t.Errorf("Endpoints of a chain without rules: %v, %v; want not there", ok, err)
	}
	for _, commits := range []int{0, 1, readTries - 1} {
		src := &committing{commits: commits}
		eps, ok, err := reader(t, src, "nftables").Endpoints(nftChain0)
		if err != nil || !ok || !maps.Equal(eps, eps0) {
			t.Errorf("Endpoints with %d commits during the reads: %v, %v, %v", commits, sortedKeys(eps), ok, err)
		}
		if src.reads != commits+1 {
			t.Errorf("Endpoints with %d commits during the reads read %d times, want %d", commits, src.reads, commits+1)
		}
	}
	src := &committing{commits: readTries}
	if _, _, err := reader(t, src, "nftables").Endpoints(nftChain0); err == nil || !strings.Contains(err.Error(), "changed during each") {
		t.Errorf("Endpoints with a commit during each read: %v, want an error saying so", err)
	}
	// With no commit between, a map not there is an error.
	if _, _, err := reader(t, missingMaps{recorded{}}, "nftables").Endpoints(nftChain0); !errors.Is(err, unix.ENOENT) {
		t.Errorf("Endpoints of a chain whose map is not there: %v, want ENOENT", err)
	}
}

// committing answers as recorded, but its first commits reads see a commit: the
// generation changes in the middle of the read, whose map is gone.
type committing struct {
	commits, reads int
	g              uint32
	inRead         bool
}

func (c *committing) rules(table, chain string) ([]netlink.Message, error) {
	return recorded{}.rules(table, chain)
}

func (c *committing) elems(table, set string) ([]netlink.Message, error) {
	if c.commits > 0 {
		return nil, fmt.Errorf("elements of %s: %w", set, unix.ENOENT)
	}
	return recorded{}.elems(table, set)
}

// gen is called before and after each read.
func (c *committing) gen() ([]netlink.Message, error) {
	c.inRead = !c.inRead
	if c.inRead {
		c.reads++
	} else if c.commits > 0 {
		c.commits--
		c.g++
	}
	msgs, err := recorded{}.gen()
	if err != nil {
		return nil, err
	}
	d := slices.Clone(msgs[0].Data)
	a := attrs{b: d[nfgenmsgLen:]}
	for a.next() {
		if a.typ == unix.NFTA_GEN_ID {
			binary.BigEndian.PutUint32(a.data, c.g)
		}
	}
	msgs[0].Data = d
	return msgs, nil
}

// missingMaps answers set element dumps with ENOENT.
type missingMaps struct{ nftSource }

func (missingMaps) elems(string, string) ([]netlink.Message, error) { return nil, unix.ENOENT }

func TestDecodeGen(t *testing.T) {
	msgs, err := recorded{}.gen()
	if err != nil {
		t.Fatal(err)
	}
	if g, err := decodeGen(msgs); err != nil || g == 0 {
		t.Errorf("generation %d, %v", g, err)
	}
	if _, err := decodeGen(nil); err == nil {
		t.Error("no answer: no error")
	}
}

// What the rules of a Service chain decode to: the affinity rule's goto (its lookup of
// the affinity set is not a verdict map) and the load-balancing rule's anonymous vmap in
// nftables mode; the jumps of iptables mode.
func TestDecodeRules(t *testing.T) {
	for _, tc := range []struct {
		table, chain string
		want         []nftRule
	}{
		{NFTTable, nftChain1, []nftRule{
			{chain: nftChain1, verdicts: []string{"mark-for-masquerade"}, dst: vip1}, // ip daddr, tcp dport
			{chain: nftChain1, verdicts: []string{"endpoint-E4-default/bench-00001/tcp/http__10.128.0.4/8080"}},
			{chain: nftChain1, vmaps: []string{"__map1"}},
		}},
		{IPTablesTable, iptChain1, []nftRule{
			{chain: iptChain1, verdicts: []string{"KUBE-SEP-E4"}},
			{chain: iptChain1, verdicts: []string{"KUBE-SEP-E4"}},
		}},
		{IPTablesTable, iptServices, []nftRule{
			{chain: iptServices, verdicts: []string{iptChain0}, dst: vip0},
			{chain: iptServices, verdicts: []string{iptChain1}, dst: vip1},
		}},
	} {
		msgs, err := recorded{}.rules(tc.table, tc.chain)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeRules(msgs)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(tc.want) {
			t.Fatalf("%s: %d rules %+v, want %d", tc.chain, len(got), got, len(tc.want))
		}
		for i := range got {
			g, w := got[i], tc.want[i]
			if g.chain != w.chain || !slices.Equal(g.verdicts, w.verdicts) || !slices.Equal(g.vmaps, w.vmaps) || g.dnat != w.dnat || g.dst != w.dst {
				t.Errorf("%s rule %d: %+v, want %+v", tc.chain, i, g, w)
			}
		}
	}
}

// The endpoint chains' DNAT: nftables' nat expression from its registers, iptables' xt
// DNAT target.
func TestDecodeDNAT(t *testing.T) {
	for table, chain := range map[string]string{NFTTable: "endpoint-E4-default/bench-00001/tcp/http__10.128.0.4/8080", IPTablesTable: "KUBE-SEP-E4"} {
		msgs, err := recorded{}.rules(table, chain)
		if err != nil {
			t.Fatal(err)
		}
		rules, err := decodeRules(msgs)
		if err != nil {
			t.Fatal(err)
		}
		var got []netip.AddrPort
		for _, r := range rules {
			if r.dnat.IsValid() {
				got = append(got, r.dnat)
			}
		}
		if want := []netip.AddrPort{netip.MustParseAddrPort("10.128.0.4:8080")}; !slices.Equal(got, want) {
			t.Errorf("%s %s: DNAT %v, want %v", table, chain, got, want)
		}
	}
}

func TestXTDNATRevisions(t *testing.T) {
	// The minimum is the destination; these ranges' maximum (10.128.0.5:8081) differs.
	want := netip.MustParseAddrPort("10.128.0.4:8080")
	rev0 := []byte{1, 0, 0, 0, 3, 0, 0, 0, 10, 128, 0, 4, 10, 128, 0, 5, 0x1f, 0x90, 0x1f, 0x91}
	rev1 := make([]byte, 40)
	copy(rev1[4:], []byte{10, 128, 0, 4})
	copy(rev1[20:], []byte{10, 128, 0, 5})
	copy(rev1[36:], []byte{0x1f, 0x90, 0x1f, 0x91})
	rev2 := append(slices.Clone(rev1), 0, 0)
	for rev, info := range [][]byte{rev0, rev1, rev2} {
		if got, err := xtDNAT(uint32(rev), info); err != nil || got != want {
			t.Errorf("revision %d: %v, %v; want %v", rev, got, err, want)
		}
	}
	if _, err := xtDNAT(3, rev2); err == nil {
		t.Error("revision 3: no error")
	}
	if _, err := xtDNAT(1, rev0); err == nil {
		t.Error("revision 1 of 20 bytes: no error")
	}
}

func TestServiceIPsKey(t *testing.T) {
	k := []byte{10, 96, 16, 1, unix.IPPROTO_UDP, 0, 0, 0, 0, 53, 0, 0}
	want := VIP{Addr: netip.MustParseAddr("10.96.16.1"), Proto: "udp", Port: 53}
	if got, err := serviceIPsKey(k); err != nil || got != want {
		t.Errorf("%x: %v, %v; want %v", k, got, err, want)
	}
	if _, err := serviceIPsKey(k[:8]); err == nil {
		t.Error("8-byte key: no error")
	}
	k[4] = 99
	if _, err := serviceIPsKey(k); err == nil {
		t.Error("protocol 99: no error")
	}
}

// A dump the ruleset changed under is an error that says so (EINTR, read again).
func TestDumpInterrupted(t *testing.T) {
	msgs, err := recorded{}.rules(NFTTable, nftChain0)
	if err != nil {
		t.Fatal(err)
	}
	msgs[0].Header.Flags |= netlink.DumpInterrupted
	if _, err := decodeRules(msgs); !errors.Is(err, unix.EINTR) {
		t.Errorf("decodeRules of an interrupted dump: %v, want EINTR", err)
	}
}

// The requests name the table (and the chain or set) for the kernel to filter.
func TestRequests(t *testing.T) {
	if g := genRequest(); g.Header.Type != nftMessage(unix.NFT_MSG_GETGEN) || g.Header.Flags != netlink.Request|netlink.Acknowledge {
		t.Errorf("generation request: type %#x flags %v", g.Header.Type, g.Header.Flags)
	}
	for _, tc := range []struct {
		req   func() (netlink.Message, error)
		typ   int
		attrs map[uint16]string
	}{
		{func() (netlink.Message, error) { return ruleDump(NFTTable, nftChain0) }, unix.NFT_MSG_GETRULE,
			map[uint16]string{unix.NFTA_RULE_TABLE: NFTTable, unix.NFTA_RULE_CHAIN: nftChain0}},
		{func() (netlink.Message, error) { return ruleDump(IPTablesTable, "") }, unix.NFT_MSG_GETRULE,
			map[uint16]string{unix.NFTA_RULE_TABLE: IPTablesTable}},
		{func() (netlink.Message, error) { return elemDump(NFTTable, nftServiceIPs) }, unix.NFT_MSG_GETSETELEM,
			map[uint16]string{unix.NFTA_SET_ELEM_LIST_TABLE: NFTTable, unix.NFTA_SET_ELEM_LIST_SET: nftServiceIPs}},
	} {
		m, err := tc.req()
		if err != nil {
			t.Fatal(err)
		}
		if m.Header.Type != nftMessage(tc.typ) || m.Header.Flags != netlink.Request|netlink.Dump {
			t.Errorf("type %#x flags %v, want %#x, a dump request", m.Header.Type, m.Header.Flags, nftMessage(tc.typ))
		}
		if m.Data[0] != unix.NFPROTO_IPV4 {
			t.Errorf("family %d, want ip", m.Data[0])
		}
		got := map[uint16]string{}
		a := attrs{b: m.Data[nfgenmsgLen:]}
		for a.next() {
			got[a.typ] = nlString(a.data)
		}
		if a.err != nil {
			t.Fatal(a.err)
		}
		if !maps.Equal(got, tc.attrs) {
			t.Errorf("attributes %v, want %v", got, tc.attrs)
		}
	}
}

// The 16-byte registers and the 32-bit ones address the same words.
func TestRegisterWords(t *testing.T) {
	for r, want := range map[uint32]uint32{unix.NFT_REG_1: 0, unix.NFT_REG_2: 4, unix.NFT_REG_4: 12, unix.NFT_REG32_00: 0, unix.NFT_REG32_05: 5, unix.NFT_REG32_15: 15} {
		if got, ok := word(r); !ok || got != want {
			t.Errorf("word(%d) = %d, %v; want %d", r, got, ok, want)
		}
	}
	for _, r := range []uint32{unix.NFT_REG_VERDICT, 5, unix.NFT_REG32_15 + 1} {
		if w, ok := word(r); ok {
			t.Errorf("word(%d) = %d, want none", r, w)
		}
	}
}

// A truncated attribute is an error; no truncation panics.
func TestAttrsTruncated(t *testing.T) {
	msgs, err := recorded{}.rules(NFTTable, nftChain0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := checkDump(msgs[0], unix.NFT_MSG_NEWRULE)
	if err != nil {
		t.Fatal(err)
	}
	first := int(binary.NativeEndian.Uint16(b))
	for n := range len(b) {
		a := attrs{b: b[:n]}
		for a.next() {
		}
		if n > 0 && n < first && a.err == nil {
			t.Errorf("%d bytes of a %d-byte attribute: no error", n, first)
		}
		m := msgs[0]
		m.Data = m.Data[:nfgenmsgLen+n]
		decodeRules([]netlink.Message{m})
	}
}

// The walk masks a type's flags, and refuses a length shorter than the header.
func TestAttrs(t *testing.T) {
	b := []byte{
		8, 0, 2, 0x80, 1, 2, 3, 4, // type 2 with NLA_F_NESTED, 4 bytes
		5, 0, 3, 0, 9, 0, 0, 0, // type 3, 1 byte and 3 of padding
		2, 0, 1, 0, // length 2
	}
	a := attrs{b: b}
	var got []string
	for a.next() {
		got = append(got, fmt.Sprintf("%d:%x", a.typ, a.data))
	}
	if want := []string{"2:01020304", "3:09"}; !slices.Equal(got, want) {
		t.Errorf("attributes %v, want %v", got, want)
	}
	if a.err == nil {
		t.Error("an attribute of length 2: no error")
	}
}
