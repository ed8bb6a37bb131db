package nft

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"

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
	// SetElements lists the elements of every set of the table in one nft run, by set name
	// (a set without elements is there with none; kerr.ErrNotFound: no table).
	SetElements(ctx context.Context) (map[string][]*knftables.Element, error)
	// Chains reads the table's chains and their rules (kerr.ErrNotFound: no table).
	Chains(ctx context.Context) ([]Chain, error)
	// Sets lists the names of the table's sets (kerr.ErrNotFound: no table).
	Sets(ctx context.Context) ([]string, error)
	// Name is the table as nft names it, e.g. "ip kipvs".
	Name() string
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

// conn is Interface over the nft program, run in a network namespace.
type conn struct {
	family inet.Family
	table  string
	ns     netns.NsHandle
	nft    knftables.Interface
	path   string
}

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
	return c, nil
}

func (c *conn) Family() inet.Family { return c.family }

func (c *conn) NewTransaction() *knftables.Transaction { return c.nft.NewTransaction() }

func (c *conn) Run(ctx context.Context, tx *knftables.Transaction) error {
	return netnsutil.Do(c.ns, func() error { return c.nft.Run(ctx, tx) })
}

func (c *conn) Check(ctx context.Context, tx *knftables.Transaction) error {
	return netnsutil.Do(c.ns, func() error { return c.nft.Check(ctx, tx) })
}

// SetElements runs `nft --json list table` (the table with its sets' elements) and reads
// the sets from it (ParseSetElements).
func (c *conn) SetElements(ctx context.Context) (map[string][]*knftables.Element, error) {
	out, err := c.list(ctx, "--json", "list", "table", string(Family(c.family)), c.table)
	if err != nil {
		return nil, err
	}
	return ParseSetElements(out)
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
	out, err := c.list(ctx, "-t", "list", "table", string(Family(c.family)), c.table)
	if err != nil {
		return nil, err
	}
	return ParseTable(string(out))
}

// list runs nft with args (a listing of the table) in the namespace and returns its
// output; a missing table is kerr.ErrNotFound.
func (c *conn) list(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, c.path, args...)
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
	return out, nil
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
