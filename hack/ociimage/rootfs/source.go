package rootfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/kipvs/kipvs/hack/ociimage/oci"
)

// ErrNotExist is returned for paths the source lacks.
var ErrNotExist = fs.ErrNotExist

// errNotDir is returned when a path goes through something that is no directory.
var errNotDir = errors.New("not a directory")

// Source is a root file system to pick from. Paths are relative and slash-separated; nothing
// is followed: a symbolic link is returned as one.
type Source interface {
	// Lstat returns the entry at p; a File's Data may be left empty.
	Lstat(p string) (oci.Entry, error)
	// ReadFile returns a regular file's content.
	ReadFile(p string) ([]byte, error)
	// ReadDir returns the names in directory p, sorted.
	ReadDir(p string) ([]string, error)
}

// TreeSource is a Source over an in-memory tree (debian.Unpack's output).
type TreeSource struct{ Tree *oci.Tree }

// Lstat implements Source.
func (s TreeSource) Lstat(p string) (oci.Entry, error) {
	if p == "" || p == "." {
		return oci.Entry{Type: oci.Dir, Mode: 0o755}, nil
	}
	e, ok := s.Tree.Get(p)
	if !ok {
		return oci.Entry{}, fmt.Errorf("%s: %w", p, ErrNotExist)
	}
	return e, nil
}

// ReadFile implements Source.
func (s TreeSource) ReadFile(p string) ([]byte, error) {
	e, err := s.Lstat(p)
	if err != nil {
		return nil, err
	}
	if e.Type != oci.File {
		return nil, fmt.Errorf("%s: not a regular file", p)
	}
	return e.Data, nil
}

// ReadDir implements Source.
func (s TreeSource) ReadDir(p string) ([]string, error) {
	prefix := ""
	if p != "" && p != "." {
		prefix = p + "/"
	}
	var out []string
	for _, e := range s.Tree.Entries() {
		rest, ok := strings.CutPrefix(e.Path, prefix)
		if ok && rest != "" && !strings.Contains(rest, "/") {
			out = append(out, rest)
		}
	}
	return out, nil
}

// DirSource is a Source over a directory of this machine ("/" in a build container).
type DirSource struct{ Root string }

func (s DirSource) host(p string) string {
	return filepath.Join(s.Root, filepath.FromSlash(p))
}

// Lstat implements Source.
func (s DirSource) Lstat(p string) (oci.Entry, error) {
	fi, err := os.Lstat(s.host(p))
	if err != nil {
		return oci.Entry{}, err
	}
	e := oci.Entry{Path: p, Mode: fi.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)}
	switch {
	case fi.IsDir():
		e.Type = oci.Dir
	case fi.Mode().IsRegular():
		e.Type = oci.File
	case fi.Mode()&fs.ModeSymlink != 0:
		e.Type = oci.Symlink
		if e.Linkname, err = os.Readlink(s.host(p)); err != nil {
			return oci.Entry{}, err
		}
	default:
		return oci.Entry{}, fmt.Errorf("%s: neither a file, a directory nor a symbolic link", p)
	}
	return e, nil
}

// ReadFile implements Source.
func (s DirSource) ReadFile(p string) ([]byte, error) {
	return os.ReadFile(s.host(p))
}

// ReadDir implements Source.
func (s DirSource) ReadDir(p string) ([]string, error) {
	des, err := os.ReadDir(s.host(p))
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(des))
	for _, de := range des {
		out = append(out, de.Name())
	}
	sort.Strings(out)
	return out, nil
}

// Resolve follows every symbolic link in p inside the source's root (an absolute link target
// starts again at the source's root, ".." stops there) and returns the path it names, with its
// entry. Missing paths give an error wrapping ErrNotExist.
func Resolve(src Source, p string) (string, oci.Entry, error) {
	const maxLinks = 40
	links := 0
	rest := strings.Split(strings.Trim(path.Clean("/"+p), "/"), "/")
	cur := ""
	for len(rest) > 0 {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			cur = path.Dir(cur)
			if cur == "." {
				cur = ""
			}
			continue
		}
		next := path.Join(cur, c)
		e, err := src.Lstat(next)
		if err != nil {
			return "", oci.Entry{}, fmt.Errorf("resolve %s: %w", p, err)
		}
		if e.Type != oci.Symlink {
			if len(rest) > 0 && e.Type != oci.Dir {
				return "", oci.Entry{}, fmt.Errorf("resolve %s: %s: %w", p, next, errNotDir)
			}
			cur = next
			continue
		}
		if links++; links > maxLinks {
			return "", oci.Entry{}, fmt.Errorf("resolve %s: more than %d symbolic links", p, maxLinks)
		}
		if strings.HasPrefix(e.Linkname, "/") {
			cur = ""
		}
		rest = append(strings.Split(e.Linkname, "/"), rest...)
	}
	if cur == "" {
		return "", oci.Entry{Type: oci.Dir, Mode: 0o755}, nil
	}
	e, err := src.Lstat(cur)
	if err != nil {
		return "", oci.Entry{}, fmt.Errorf("resolve %s: %w", p, err)
	}
	return cur, e, nil
}

// ReadResolved returns the content of the regular file p names, following links.
func ReadResolved(src Source, p string) ([]byte, oci.Entry, error) {
	rp, e, err := Resolve(src, p)
	if err != nil {
		return nil, oci.Entry{}, err
	}
	if e.Type != oci.File {
		return nil, oci.Entry{}, fmt.Errorf("%s: not a regular file", p)
	}
	data, err := src.ReadFile(rp)
	if err != nil {
		return nil, oci.Entry{}, err
	}
	return data, e, nil
}

// Glob returns the source paths pattern matches, sorted; each component may hold path.Match
// wildcards, and directories on the way are entered through symbolic links.
func Glob(src Source, pattern string) ([]string, error) {
	parts := strings.Split(strings.Trim(path.Clean("/"+pattern), "/"), "/")
	cands := []string{""}
	for _, part := range parts {
		var next []string
		for _, c := range cands {
			if !hasMeta(part) {
				p := path.Join(c, part)
				if _, _, err := Resolve(src, p); err == nil {
					next = append(next, p)
				} else if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, errNotDir) {
					return nil, err
				}
				continue
			}
			rp, e, err := Resolve(src, c)
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, errNotDir) || (err == nil && e.Type != oci.Dir) {
				continue
			}
			if err != nil {
				return nil, err
			}
			names, err := src.ReadDir(rp)
			if err != nil {
				return nil, err
			}
			for _, n := range names {
				ok, err := path.Match(part, n)
				if err != nil {
					return nil, fmt.Errorf("pattern %s: %w", pattern, err)
				}
				if ok {
					next = append(next, path.Join(c, n))
				}
			}
		}
		cands = next
	}
	sort.Strings(cands)
	return cands, nil
}

func hasMeta(s string) bool {
	return strings.ContainsAny(s, `*?[\`)
}
