package rootfs

import (
	"bytes"
	"debug/elf"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/kipvs/kipvs/hack/ociimage/oci"
)

// Selection says which part of a source becomes the image's file system.
type Selection struct {
	// All takes the whole source as it is (links stay links), but for the paths under
	// Drop; the other fields then add to it.
	All  bool
	Drop []string
	// Dirs are created empty (mount points, /tmp), with their modes.
	Dirs []Dir
	// Copy are path patterns (path.Match per component) of files in the source; each must
	// match at least one. A match is copied to the same path, symbolic links followed (its
	// content, not the link, like cp -L), with the mode of the file it resolves to.
	Copy []string
	// Links are symbolic links to create.
	Links []Link
	// Files are files of fixed content to create (replacing the source's).
	Files []File
	// Multiarch is the Debian multiarch tuple ("x86_64-linux-gnu") of the loader's search
	// directories. Every shared library the copied ELF files load, directly or through each
	// other, is copied to lib/MULTIARCH/NAME (the loader's first search directory; the image
	// has no ld.so.cache), and each ELF interpreter to its own path.
	Multiarch string
}

// Dir is a directory of a Selection.
type Dir struct {
	Path string
	Mode fs.FileMode
}

// File is a file of a Selection.
type File struct {
	Path string
	Data string
	Mode fs.FileMode
}

// Link is a symbolic link of a Selection.
type Link struct {
	Path, Target string
}

// Apply copies the selection from src into dst.
func (s Selection) Apply(src Source, dst *oci.Tree) error {
	if s.All {
		if err := s.copyAll(src, dst, ""); err != nil {
			return err
		}
	}
	for _, d := range s.Dirs {
		if err := dst.AddDir(d.Path, d.Mode); err != nil {
			return err
		}
	}
	var elfs []string
	for _, pat := range s.Copy {
		matches, err := Glob(src, pat)
		if err != nil {
			return err
		}
		if len(matches) == 0 {
			return fmt.Errorf("%s: matches nothing in the source", pat)
		}
		for _, m := range matches {
			data, e, err := ReadResolved(src, m)
			if err != nil {
				return err
			}
			if err := dst.AddFile(m, data, e.Mode); err != nil {
				return err
			}
			if isELF(data) {
				elfs = append(elfs, m)
			}
		}
	}
	for _, l := range s.Links {
		if err := dst.AddSymlink(l.Path, l.Target); err != nil {
			return err
		}
	}
	for _, f := range s.Files {
		if err := dst.AddFile(f.Path, []byte(f.Data), f.Mode); err != nil {
			return err
		}
	}
	if len(elfs) == 0 {
		return nil
	}
	if s.Multiarch == "" {
		return fmt.Errorf("the selection copies ELF files (%s, ...) but names no multiarch tuple to find their libraries", elfs[0])
	}
	return s.addLibraries(src, dst, elfs)
}

// copyAll copies directory dir of src (and what it holds) into dst, without following links,
// skipping s.Drop.
func (s Selection) copyAll(src Source, dst *oci.Tree, dir string) error {
	if ts, ok := src.(TreeSource); ok && dir == "" { // one pass instead of a ReadDir per directory
		for _, e := range ts.Tree.Entries() {
			if s.dropped(e.Path) {
				continue
			}
			if err := dst.Add(e); err != nil {
				return err
			}
		}
		return nil
	}
	names, err := src.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, n := range names {
		p := path.Join(dir, n)
		if s.dropped(p) {
			continue
		}
		e, err := src.Lstat(p)
		if err != nil {
			return err
		}
		e.Path = p
		if e.Type == oci.File {
			if e.Data, err = src.ReadFile(p); err != nil {
				return err
			}
		}
		if err := dst.Add(e); err != nil {
			return err
		}
		if e.Type == oci.Dir {
			if err := s.copyAll(src, dst, p); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s Selection) dropped(p string) bool {
	for _, d := range s.Drop {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

func isELF(data []byte) bool {
	return bytes.HasPrefix(data, []byte(elf.ELFMAG))
}

// addLibraries copies the shared libraries the ELF files at paths (already in dst) need.
func (s Selection) addLibraries(src Source, dst *oci.Tree, paths []string) error {
	searchDirs := []string{"lib/" + s.Multiarch, "usr/lib/" + s.Multiarch, "lib", "usr/lib"}
	done := map[string]bool{}
	queue := append([]string(nil), paths...)
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if done[p] {
			continue
		}
		done[p] = true
		e, _ := dst.Get(p)
		f, err := elf.NewFile(bytes.NewReader(e.Data))
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		interp, err := interpreter(f)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		needed, err := f.ImportedLibraries()
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if interp != "" {
			ip, _ := oci.CleanPath(interp)
			if _, ok := dst.Get(ip); !ok {
				data, ie, err := ReadResolved(src, ip)
				if err != nil {
					return fmt.Errorf("%s: its interpreter: %w", p, err)
				}
				if err := dst.AddFile(ip, data, ie.Mode); err != nil {
					return err
				}
			}
			queue = append(queue, ip)
		}
		for _, name := range needed {
			if interp != "" && name == path.Base(interp) || isLoader(name) {
				continue // the loader is mapped already; it is not looked up by name
			}
			to := path.Join(searchDirs[0], name)
			if _, ok := dst.Get(to); !ok {
				data, le, err := findLibrary(src, searchDirs, name)
				if err != nil {
					return fmt.Errorf("%s needs %s: %w", p, name, err)
				}
				if err := dst.AddFile(to, data, le.Mode); err != nil {
					return err
				}
			}
			queue = append(queue, to)
		}
		f.Close()
	}
	return nil
}

// isLoader tells the dynamic loader's own names, which libc lists as needed.
func isLoader(name string) bool {
	matched, _ := path.Match("ld-linux*.so.*", name)
	return matched
}

func interpreter(f *elf.File) (string, error) {
	for _, prog := range f.Progs {
		if prog.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, prog.Filesz)
		if _, err := prog.ReadAt(b, 0); err != nil {
			return "", fmt.Errorf("read PT_INTERP: %w", err)
		}
		return string(bytes.TrimRight(b, "\x00")), nil
	}
	return "", nil
}

func findLibrary(src Source, dirs []string, name string) ([]byte, oci.Entry, error) {
	for _, d := range dirs {
		data, e, err := ReadResolved(src, path.Join(d, name))
		if err == nil {
			return data, e, nil
		}
	}
	return nil, oci.Entry{}, fmt.Errorf("not found in /%s, /%s, /%s or /%s of the source", dirs[0], dirs[1], dirs[2], dirs[3])
}
