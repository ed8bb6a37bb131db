package sysctl

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/vishvananda/netns"

	"github.com/kipvs/kipvs/internal/kerr"
	"github.com/kipvs/kipvs/internal/netnsutil"
)

// DefaultRoot is where the kernel exposes its parameters.
const DefaultRoot = "/proc/sys"

// Interface reads and writes kernel parameters. Both the real implementation and the fake
// return kerr.ErrNotFound for a key that does not exist and kerr.ErrInvalid for a malformed
// key; errors name the key as the caller gave it.
type Interface interface {
	// Get returns the normalised value of key.
	Get(key string) (string, error)
	// Set writes value to key unless the key already holds it. It returns the value the
	// key held before and whether it wrote. A key that already holds value is not written
	// at all, so Set succeeds on a read-only root when nothing needs to change.
	Set(key, value string) (old string, changed bool, err error)
}

// Sysctl is the real implementation: files under a root directory, opened from inside a
// network namespace. It keeps no file open between calls and is safe for concurrent use.
type Sysctl struct {
	root string
	ns   netns.NsHandle
}

var _ Interface = (*Sysctl)(nil)

// New returns a Sysctl reading files under root ("" means DefaultRoot) from inside ns.
// A closed handle (netns.None()) means the namespace of the calling thread at each call.
// The handle is borrowed: the caller keeps it open while the Sysctl is in use and closes it.
func New(root string, ns netns.NsHandle) *Sysctl {
	if root == "" {
		root = DefaultRoot
	}
	return &Sysctl{root: root, ns: ns}
}

// Root returns the directory the keys are resolved under.
func (s *Sysctl) Root() string { return s.root }

// Get implements Interface.
func (s *Sysctl) Get(key string) (string, error) {
	rel, err := Path(key)
	if err != nil {
		return "", err
	}
	var val string
	err = netnsutil.Do(s.ns, func() error {
		b, err := os.ReadFile(filepath.Join(s.root, rel))
		val = string(b)
		return err
	})
	if err != nil {
		return "", FileErr("get", key, err)
	}
	return Normalize(val), nil
}

// Set implements Interface.
func (s *Sysctl) Set(key, value string) (string, bool, error) {
	rel, err := Path(key)
	if err != nil {
		return "", false, err
	}
	want := Normalize(value)
	if want == "" {
		return "", false, fmt.Errorf("sysctl %s: set empty value: %w", key, kerr.ErrInvalid)
	}
	path := filepath.Join(s.root, rel)
	var old string
	changed := false
	err = netnsutil.Do(s.ns, func() error {
		// Open for reading and writing at once only when a write is needed: a read-only
		// root must still answer Set for a key that already holds the value.
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		old = Normalize(string(b))
		if old == want {
			return nil
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			return err
		}
		// One write call: the kernel parses the value from a single write.
		_, werr := io.WriteString(f, want+"\n")
		cerr := f.Close()
		if werr != nil {
			return werr
		}
		if cerr != nil {
			return cerr
		}
		changed = true
		return nil
	})
	if err != nil {
		return old, false, FileErr(fmt.Sprintf("set %q", want), key, err)
	}
	return old, changed, nil
}

// FileErr names the key and maps the errno to the kerr types: besides what kerr.Errno
// maps, a path through a file (ENOTDIR) is a missing key and a directory (EISDIR) is not a
// key at all.
func FileErr(op, key string, err error) error {
	switch {
	case errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("sysctl %s: %s: %w: %w", key, op, kerr.ErrNotFound, err)
	case errors.Is(err, syscall.EISDIR):
		return fmt.Errorf("sysctl %s: %s: %w: %w", key, op, kerr.ErrInvalid, err)
	}
	return kerr.Errno(fmt.Sprintf("sysctl %s: %s", key, op), err)
}

// Path converts a key in either form to its path relative to the root, in slash form,
// e.g. "net.ipv4.conf.eth0/1.rp_filter" -> "net/ipv4/conf/eth0.1/rp_filter". It returns
// kerr.ErrInvalid for an empty key, an empty component, "." or "..", or a NUL byte.
func Path(key string) (string, error) {
	i := strings.IndexAny(key, "./")
	var comps []string
	if i >= 0 && key[i] == '.' {
		comps = strings.Split(key, ".")
		for j, c := range comps {
			comps[j] = strings.ReplaceAll(c, "/", ".")
		}
	} else {
		comps = strings.Split(key, "/")
	}
	for _, c := range comps {
		if c == "" || c == "." || c == ".." || strings.ContainsRune(c, 0) {
			return "", fmt.Errorf("sysctl key %q: %w", key, kerr.ErrInvalid)
		}
	}
	return strings.Join(comps, "/"), nil
}

// Normalize trims a value and collapses inner whitespace to single spaces.
func Normalize(v string) string { return strings.Join(strings.Fields(v), " ") }
