package oci

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
)

// EntryType is what a Tree entry is.
type EntryType int

// The kinds of entries an image layer holds here.
const (
	Dir EntryType = iota
	File
	Symlink
)

// Entry is one file, directory or symbolic link of a Tree.
type Entry struct {
	Path     string      // clean, relative, slash-separated ("usr/sbin/iptables")
	Type     EntryType   //
	Mode     fs.FileMode // permission bits, with fs.ModeSetuid, fs.ModeSetgid, fs.ModeSticky
	Data     []byte      // File only
	Linkname string      // Symlink only
	UID, GID int
}

// Tree is a file system: a layer's content. The parents of every entry exist (Add creates the
// missing ones as root-owned 0755 directories).
type Tree struct {
	entries map[string]*Entry
}

// NewTree returns an empty Tree.
func NewTree() *Tree {
	return &Tree{entries: map[string]*Entry{}}
}

// CleanPath makes p relative and clean ("/usr/bin/" -> "usr/bin"); it rejects paths that leave
// the root or name it.
func CleanPath(p string) (string, error) {
	c := path.Clean("/" + p)
	if c == "/" {
		return "", fmt.Errorf("path %q names the root", p)
	}
	return strings.TrimPrefix(c, "/"), nil
}

// Add puts e into the tree, replacing an entry of the same path unless one of them is a
// directory and the other not (a conflict, an error).
func (t *Tree) Add(e Entry) error {
	p, err := CleanPath(e.Path)
	if err != nil {
		return err
	}
	e.Path = p
	if err := t.mkdirAll(path.Dir(p)); err != nil {
		return fmt.Errorf("add %s: %w", p, err)
	}
	if old, ok := t.entries[p]; ok && (old.Type == Dir) != (e.Type == Dir) {
		return fmt.Errorf("add %s: already in the tree as another kind of entry", p)
	}
	t.entries[p] = &e
	return nil
}

// AddDir adds a root-owned directory.
func (t *Tree) AddDir(p string, mode fs.FileMode) error {
	return t.Add(Entry{Path: p, Type: Dir, Mode: mode})
}

// AddFile adds a root-owned regular file.
func (t *Tree) AddFile(p string, data []byte, mode fs.FileMode) error {
	return t.Add(Entry{Path: p, Type: File, Data: data, Mode: mode})
}

// AddSymlink adds a symbolic link p -> target.
func (t *Tree) AddSymlink(p, target string) error {
	return t.Add(Entry{Path: p, Type: Symlink, Linkname: target, Mode: 0o777})
}

func (t *Tree) mkdirAll(dir string) error {
	if dir == "." {
		return nil
	}
	if e, ok := t.entries[dir]; ok {
		if e.Type != Dir {
			return fmt.Errorf("parent %s is not a directory", dir)
		}
		return nil
	}
	if err := t.mkdirAll(path.Dir(dir)); err != nil {
		return err
	}
	t.entries[dir] = &Entry{Path: dir, Type: Dir, Mode: 0o755}
	return nil
}

// Get returns the entry at p.
func (t *Tree) Get(p string) (Entry, bool) {
	c, err := CleanPath(p)
	if err != nil {
		return Entry{}, false
	}
	e, ok := t.entries[c]
	if !ok {
		return Entry{}, false
	}
	return *e, true
}

// Entries returns every entry sorted by path (so a directory comes before its content).
func (t *Tree) Entries() []Entry {
	out := make([]Entry, 0, len(t.entries))
	for _, e := range t.entries {
		out = append(out, *e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}
