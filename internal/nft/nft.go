package nft

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	gnft "github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"github.com/vishvananda/netns"
	"sigs.k8s.io/knftables"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/kerr"
	"github.com/kipvs/kipvs/internal/netnsutil"
)

// Table is the name of kipvs's table in each family ("ip kipvs", "ip6 kipvs").
const Table = "kipvs"

// Family is the nf_tables family of f's table.
func Family(f inet.Family) knftables.Family {
	if f == inet.IPv6 {
		return knftables.IPv6Family
	}
	return knftables.IPv4Family
}

// Chain is one chain of the table as nft prints it.
type Chain struct {
	Name string
	// Base is a base chain's hook as "type T hook H priority P" (the priority named as nft
	// names it, e.g. dstnat); empty for a regular chain.
	Base string
	// Rules are the chain's rules in order, each as nft prints it without its handle.
	Rules []string
}

// Interface is the nf_tables access of one family's kipvs table.
type Interface interface {
	// Family is the family of the table.
	Family() inet.Family
	// NewTransaction starts a transaction on the table.
	NewTransaction() *knftables.Transaction
	// Run applies tx atomically: all of it or, on error, nothing.
	Run(ctx context.Context, tx *knftables.Transaction) error
	// Check asks the kernel to validate tx without applying it.
	Check(ctx context.Context, tx *knftables.Transaction) error
	// Elements lists the elements of set s, each as its fields in nft's notation
	// (kerr.ErrNotFound: no such set or table).
	Elements(ctx context.Context, s SetDef) ([][]string, error)
	// Update adds add to set s and deletes del from it in one transaction: all of it or,
	// on error, nothing. Adding an element there is not an error; deleting one that is
	// not fails with kerr.ErrNotFound.
	Update(ctx context.Context, s SetDef, add, del [][]string) error
	// Chains reads the table's chains and their rules (kerr.ErrNotFound: no table).
	Chains(ctx context.Context) ([]Chain, error)
	// Sets lists the names of the table's sets (kerr.ErrNotFound: no table).
	Sets(ctx context.Context) ([]string, error)
	// Name is the table as nft names it, e.g. "ip kipvs".
	Name() string
	// Close releases the netlink socket.
	Close() error
}

// Typed maps a knftables error to kipvs's typed errors, keeping it in the chain; what
// names the request.
func Typed(what string, err error) error {
	switch {
	case err == nil:
		return nil
	case knftables.IsNotFound(err):
		return fmt.Errorf("%s: %w: %w", what, kerr.ErrNotFound, err)
	case knftables.IsAlreadyExists(err):
		return fmt.Errorf("%s: %w: %w", what, kerr.ErrExists, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// conn is Interface over the nft program, run in a network namespace, for the table and
// its rules, and over nf_tables netlink (github.com/google/nftables) for the sets' elements:
// a change of a set is one netlink batch, without starting a program.
type conn struct {
	family inet.Family
	table  string
	ns     netns.NsHandle
	nft    knftables.Interface
	path   string
	nl     *gnft.Conn
}

// sendBuffer is the netlink socket's send buffer: a batch goes in one sendmsg, and the
// first sync of 10,000 Services puts about 2 MB of elements in one batch.
const sendBuffer = 64 << 20

// New opens family f's kipvs table in ns (netns.None(): the current namespace). It fails
// when nft is missing, older than 1.0.1, or the kernel refuses nf_tables.
func New(ns netns.NsHandle, f inet.Family) (Interface, error) { return NewTable(ns, f, Table) }

// NewTable is New for another table than kipvs's (for cleanup: kube-proxy's nftables-mode
// table "kube-proxy").
func NewTable(ns netns.NsHandle, f inet.Family, table string) (Interface, error) {
	c := &conn{family: f, table: table, ns: ns}
	err := netnsutil.Do(ns, func() error {
		var err error
		c.nft, err = knftables.New(Family(f), table)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("nftables: %w", err)
	}
	if c.path, err = exec.LookPath("nft"); err != nil {
		return nil, fmt.Errorf("nftables: %w", err)
	}
	opts := []gnft.ConnOption{gnft.AsLasting(), gnft.WithSockOptions(func(nc *netlink.Conn) error { return nc.SetWriteBuffer(sendBuffer) })}
	if ns.IsOpen() {
		opts = append(opts, gnft.WithNetNSFd(int(ns)))
	}
	if c.nl, err = gnft.New(opts...); err != nil {
		return nil, fmt.Errorf("nftables netlink: %w", err)
	}
	return c, nil
}

func (c *conn) Close() error { return c.nl.CloseLasting() }

func (c *conn) Family() inet.Family { return c.family }

func (c *conn) NewTransaction() *knftables.Transaction { return c.nft.NewTransaction() }

func (c *conn) Run(ctx context.Context, tx *knftables.Transaction) error {
	return netnsutil.Do(c.ns, func() error { return c.nft.Run(ctx, tx) })
}

func (c *conn) Check(ctx context.Context, tx *knftables.Transaction) error {
	return netnsutil.Do(c.ns, func() error { return c.nft.Check(ctx, tx) })
}

func (c *conn) Elements(_ context.Context, s SetDef) ([][]string, error) {
	cd, err := newCodec(s)
	if err != nil {
		return nil, err
	}
	what := "list set " + c.name() + " " + s.Name
	els, err := c.nl.GetSetElements(c.setOf(s))
	if err != nil {
		return nil, notFound(what, err)
	}
	out := make([][]string, 0, len(els))
	for _, e := range els {
		k, err := cd.decode(e.Key, e.KeyEnd)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, k)
	}
	return out, nil
}

func (c *conn) Update(_ context.Context, s SetDef, add, del [][]string) error {
	cd, err := newCodec(s)
	if err != nil {
		return err
	}
	encode := func(elems [][]string) ([]gnft.SetElement, error) {
		out := make([]gnft.SetElement, 0, len(elems))
		for _, e := range elems {
			k, end, err := cd.encode(e)
			if err != nil {
				return nil, fmt.Errorf("set %s: %w", s.Name, err)
			}
			out = append(out, gnft.SetElement{Key: k, KeyEnd: end})
		}
		return out, nil
	}
	a, err := encode(add)
	if err != nil {
		return err
	}
	d, err := encode(del)
	if err != nil {
		return err
	}
	set := c.setOf(s)
	// One message holds at most this many elements; the batch is one transaction.
	const chunk = 1000
	for i := 0; i < len(a); i += chunk {
		if err := c.nl.SetAddElements(set, a[i:min(i+chunk, len(a))]); err != nil {
			return err
		}
	}
	for i := 0; i < len(d); i += chunk {
		if err := c.nl.SetDeleteElements(set, d[i:min(i+chunk, len(d))]); err != nil {
			return err
		}
	}
	return kerr.Errno(fmt.Sprintf("update set %s %s (+%d -%d)", c.name(), s.Name, len(add), len(del)), c.nl.Flush())
}

func (c *conn) Sets(ctx context.Context) ([]string, error) {
	var names []string
	err := netnsutil.Do(c.ns, func() error {
		var err error
		names, err = c.nft.List(ctx, "set")
		return err
	})
	return names, Typed("list sets of "+c.name(), err)
}

// Chains runs `nft -t list table` (terse: without the sets' elements) and reads its chains.
func (c *conn) Chains(ctx context.Context) ([]Chain, error) {
	cmd := exec.CommandContext(ctx, c.path, "-t", "list", "table", string(Family(c.family)), c.table)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	var out []byte
	err := netnsutil.Do(c.ns, func() error {
		var err error
		out, err = cmd.Output()
		return err
	})
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if strings.Contains(msg, "No such file or directory") {
			return nil, fmt.Errorf("list table %s: %w: %s", c.name(), kerr.ErrNotFound, msg)
		}
		return nil, fmt.Errorf("list table %s: %w: %s", c.name(), err, msg)
	}
	return ParseTable(string(out))
}

func (c *conn) Name() string { return c.name() }

func (c *conn) name() string { return string(Family(c.family)) + " " + c.table }

// ParseTable reads the chains of one table from `nft -t list table` output (or `nft list
// table`: set blocks are skipped either way).
func ParseTable(text string) ([]Chain, error) {
	var chains []Chain
	var cur *Chain
	inSet := false
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "table "):
		case line == "}":
			if cur != nil {
				chains = append(chains, *cur)
				cur = nil
			}
			inSet = false
		case inSet:
		case cur == nil && strings.HasPrefix(line, "chain ") && strings.HasSuffix(line, "{"):
			cur = &Chain{Name: strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(line, "chain "), "{"))}
		case cur == nil && strings.HasSuffix(line, "{"):
			inSet = true // a set, map, counter, flowtable...
		case cur == nil && (strings.HasPrefix(line, "comment ") || strings.HasPrefix(line, "flags ")):
			// the table's own attributes
		case cur == nil:
			return nil, fmt.Errorf("nft listing: unexpected line %q", line)
		case strings.HasPrefix(line, "type ") && len(cur.Rules) == 0 && cur.Base == "":
			cur.Base = baseSpec(line)
		default:
			cur.Rules = append(cur.Rules, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("nft listing: %w", err)
	}
	if cur != nil {
		return nil, errors.New("nft listing: unterminated chain " + cur.Name)
	}
	return chains, nil
}

// baseSpec reads "type nat hook prerouting priority dstnat; policy accept;" as
// "type nat hook prerouting priority dstnat" (kipvs's base chains keep policy accept).
func baseSpec(line string) string {
	spec, _, _ := strings.Cut(line, ";")
	return strings.Join(strings.Fields(spec), " ")
}

// BaseSpec is the Base of a chain declared as c.
func BaseSpec(c *knftables.Chain) string {
	if c.Type == nil || c.Hook == nil || c.Priority == nil {
		return ""
	}
	return fmt.Sprintf("type %s hook %s priority %s", *c.Type, *c.Hook, *c.Priority)
}
