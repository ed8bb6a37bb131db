package ipset

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math/bits"
	"strings"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/kerr"
)

// MaxNameLen is the longest set name the kernel accepts (IPSET_MAXNAMELEN minus the NUL).
const MaxNameLen = 31

// TempPrefix starts the name of the temporary set Replace fills before swapping it in; see
// TempName. A set with this prefix that outlives a Replace is a leftover of an interrupted one.
const TempPrefix = "KIPVS-TMP-"

// Defaults, as upstream kube-proxy creates its sets (and as the kernel defaults them).
const (
	DefaultHashSize = 1024
	DefaultMaxElem  = 65536
)

// minHashSize is the kernel's IPSET_MIMINAL_HASHSIZE.
const minHashSize = 64

// ErrFull: a hash set already holds maxelem members (the kernel's "Hash is full").
var ErrFull = errors.New("set is full")

// Type is an ipset set type, spelled as the kernel and ipset(8) spell it.
type Type string

// The set types kube-proxy's IPVS mode uses.
const (
	HashIP        Type = "hash:ip"
	HashIPPort    Type = "hash:ip,port"
	HashIPPortIP  Type = "hash:ip,port,ip"
	HashIPPortNet Type = "hash:ip,port,net"
	HashNet       Type = "hash:net"
	BitmapPort    Type = "bitmap:port"
)

// Supported reports whether the package can create sets of this type and handle their members.
func (t Type) Supported() bool {
	switch t {
	case HashIP, HashIPPort, HashIPPortIP, HashIPPortNet, HashNet, BitmapPort:
		return true
	}
	return false
}

// IsHash reports whether t is a hash:* type (those have a family, hashsize and maxelem).
func (t Type) IsHash() bool { return strings.HasPrefix(string(t), "hash:") }

// parts is the number of comma-separated parts of a member in ipset notation.
func (t Type) parts() int {
	switch t {
	case HashIPPort:
		return 2
	case HashIPPortIP, HashIPPortNet:
		return 3
	}
	return 1
}

// familyName is a hash set's family as ipset writes it: inet or inet6 ("" for none).
func familyName(f inet.Family) string {
	switch f {
	case 0:
		return ""
	case inet.IPv4:
		return "inet"
	case inet.IPv6:
		return "inet6"
	}
	return f.String()
}

// Set is a set's header: what Create takes and what List reports.
type Set struct {
	Name string
	Type Type
	// Family of a hash set: inet.IPv4 (the default when zero, ipset's inet) or inet.IPv6
	// (inet6). Always zero for bitmap:port, which has no family (Create ignores whatever is
	// given).
	Family inet.Family
	// HashSize is the initial hash table size of a hash set: 0 means DefaultHashSize; the
	// kernel raises it to at least 64 and a power of two. The kernel grows the table as the
	// set fills, and reports the current size, so List can show more than was asked for; Create
	// and Replace therefore never compare it.
	HashSize uint32
	// MaxElem is the member limit of a hash set; 0 means DefaultMaxElem.
	MaxElem uint32
	// PortFrom-PortTo is the range of a bitmap:port set; both 0 means 0-65535.
	PortFrom, PortTo uint16
	// Comment: members may carry a comment (the set's "comment" extension).
	Comment bool
}

// SetInfo is a set as listed: its header as the kernel reports it, its members (sorted) and
// how many kernel objects (iptables rules, list:set sets) reference it.
type SetInfo struct {
	Set
	References int
	Entries    []Entry
	// Elements is the member count the kernel reports; for a type this package does not
	// support (Type.Supported), Entries is empty and only this count is known.
	Elements int
}

// String is the set's header in `ipset save` create-line notation without the leading
// "create NAME", e.g. "hash:ip,port family inet hashsize 1024 maxelem 65536".
func (s Set) String() string {
	var b strings.Builder
	b.WriteString(string(s.Type))
	switch {
	case s.Type.IsHash():
		fmt.Fprintf(&b, " family %s hashsize %d maxelem %d", familyName(s.Family), s.HashSize, s.MaxElem)
	case s.Type == BitmapPort:
		fmt.Fprintf(&b, " range %d-%d", s.PortFrom, s.PortTo)
	}
	if s.Comment {
		b.WriteString(" comment")
	}
	return b.String()
}

// CheckName reports (as kerr.ErrInvalid) a set name the kernel or the Dump format cannot take:
// empty, longer than MaxNameLen bytes, or with spaces, quotes or control characters.
func CheckName(name string) error {
	if name == "" {
		return fmt.Errorf("ipset: empty set name: %w", kerr.ErrInvalid)
	}
	if len(name) > MaxNameLen {
		return fmt.Errorf("ipset: set name %q is %d bytes, longer than %d: %w", name, len(name), MaxNameLen, kerr.ErrInvalid)
	}
	for _, c := range name {
		if c <= ' ' || c == '"' || c == '\'' || c == 0x7f {
			return fmt.Errorf("ipset: set name %q has a space, quote or control character: %w", name, kerr.ErrInvalid)
		}
	}
	return nil
}

// TempName is the temporary set Replace builds name's new content in: TempPrefix and eight hex
// digits of an FNV-1a hash of name (18 bytes, within MaxNameLen however long name is). It is
// deterministic, so a Replace first removes the leftover of an interrupted Replace of the same
// set.
func TempName(name string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	return fmt.Sprintf("%s%08x", TempPrefix, h.Sum32())
}

// Normalize checks a Create/Replace request and fills in the defaults the kernel applies, so
// the result compares equal to what List reports for a fresh set.
func (s Set) Normalize() (Set, error) {
	if err := CheckName(s.Name); err != nil {
		return s, err
	}
	bad := func(format string, a ...any) (Set, error) {
		return s, fmt.Errorf("ipset: set %s (%s): %s: %w", s.Name, s.Type, fmt.Sprintf(format, a...), kerr.ErrInvalid)
	}
	if !s.Type.Supported() {
		return bad("unsupported set type %q", string(s.Type))
	}
	if s.Type == BitmapPort {
		if s.HashSize != 0 || s.MaxElem != 0 {
			return bad("hashsize/maxelem given for a bitmap:port set")
		}
		s.Family = 0
		if s.PortFrom == 0 && s.PortTo == 0 {
			s.PortTo = 65535
		}
		if s.PortFrom > s.PortTo {
			return bad("port range %d-%d is reversed", s.PortFrom, s.PortTo)
		}
		return s, nil
	}
	if s.PortFrom != 0 || s.PortTo != 0 {
		return bad("port range given for a hash set")
	}
	switch s.Family {
	case 0:
		s.Family = inet.IPv4
	case inet.IPv4, inet.IPv6:
	default:
		return bad("family %q is neither inet nor inet6", familyName(s.Family))
	}
	if s.HashSize == 0 {
		s.HashSize = DefaultHashSize
	}
	if s.HashSize > 1<<31 {
		return bad("hashsize %d is larger than 2^31", s.HashSize)
	}
	if s.HashSize < minHashSize {
		s.HashSize = minHashSize
	}
	s.HashSize = 1 << bits.Len32(s.HashSize-1) // round up to a power of two, as the kernel does
	if s.MaxElem == 0 {
		s.MaxElem = DefaultMaxElem
	}
	return s, nil
}

// compatible reports whether an existing set (as listed) satisfies a normalized request: same
// type, family, maxelem, port range and comment extension. HashSize is not compared: the kernel
// grows it, and its own "create -exist" check ignores it too.
func compatible(have, want Set) bool {
	return have.Type == want.Type && have.Family == want.Family && have.MaxElem == want.MaxElem &&
		have.PortFrom == want.PortFrom && have.PortTo == want.PortTo && have.Comment == want.Comment
}

// Interface is the ipset adapter. Every method is safe for concurrent use. Errors match
// kerr.ErrNotFound (no such set), kerr.ErrExists (a set of that name exists with another
// header), kerr.ErrInvalid (a malformed name, header or member, or a member of the wrong type
// or family for its set), kerr.ErrBusy (the set is referenced) and ErrFull.
type Interface interface {
	// Create makes the set. If a set of that name exists with the same type, family, maxelem,
	// range and comment extension it succeeds without change; with a different one it fails
	// with kerr.ErrExists.
	Create(s Set) error
	// Destroy removes a set: kerr.ErrNotFound when absent, kerr.ErrBusy when referenced (e.g.
	// by an iptables -m set rule).
	Destroy(name string) error
	// Flush removes every member of a set.
	Flush(name string) error
	// Swap exchanges the contents and headers of two sets of the same type and family (else
	// kerr.ErrInvalid); references stay with the names. The kernel may refuse it with
	// kerr.ErrBusy while another process is in the middle of a multi-message listing of
	// either set.
	Swap(a, b string) error
	// Add adds members; a member already present is not an error (its comment is updated).
	// Every member is checked against the set's type and family before any is sent; a
	// member that fails the checks (wrong shape or family, a net of length 0, ...) is not
	// sent and is named in the error (kerr.ErrInvalid), and the other members are still
	// added: one bad member never keeps the rest of a batch out of the set. A kernel error
	// stops the batch there.
	Add(set string, entries ...Entry) error
	// Del removes members; an absent member is not an error. Bad members are handled as in
	// Add: reported, the others still removed.
	Del(set string, entries ...Entry) error
	// Test reports whether the set matches e. As in the kernel, testing a host address (a
	// net of full length) against a hash:net or hash:ip,port,net set matches any member net
	// that contains it.
	Test(set string, e Entry) (bool, error)
	// List returns one set's header and members.
	List(name string) (*SetInfo, error)
	// Header returns one set's header, references and member count (Elements), without
	// its members: one short kernel request however large the set is.
	Header(name string) (*SetInfo, error)
	// ListNames returns the names of all sets, sorted.
	ListNames() ([]string, error)
	// Replace makes the set hold exactly entries, with the given header, in one kernel step:
	// it fills TempName(s.Name), swaps it with the set (created empty first if absent) and
	// destroys it. Nothing changes when the set already matches. A set of that name with
	// another type or family gives kerr.ErrExists. If a step fails the set keeps its old
	// content and the temp set is removed; only a failed final destroy leaves the temp set
	// behind (with the new content swapped in), and the next Replace that changes the set
	// removes it. Callers may sweep sets named TempPrefix* at start-up.
	Replace(s Set, entries []Entry) error
	// Dump returns every set in the namespace in the package's Dump format.
	Dump() (string, error)
	// Close releases the instance's resources; later calls fail.
	Close() error
}

// ErrClosed: the instance was closed.
var ErrClosed = errors.New("ipset: instance closed")

// EnsureError is Create's answer, in the real implementation and the fake, when the name
// is taken by a set with header have: nil when have satisfies want, else kerr.ErrExists.
func EnsureError(want, have Set) error {
	if compatible(have, want) {
		return nil
	}
	return fmt.Errorf("ipset: create %s: the set exists as %s, want %s: %w", want.Name, have.String(), want.String(), kerr.ErrExists)
}
