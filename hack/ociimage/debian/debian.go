package debian

import (
	"archive/tar"
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/kipvs/kipvs/hack/ociimage/oci"
)

// Package is one downloaded .deb.
type Package struct {
	Name, Version, Arch string
	File                string // path of the .deb in the cache
	Depends             []string
}

// Fetcher downloads packages into Cache.
type Fetcher struct {
	Cache string
	// Arch is the Debian architecture to fetch ("amd64", "arm64"); "" is apt's native one.
	// A foreign architecture's packages go to Cache/ARCH, fetched through apt state of its
	// own in Cache/ARCH/apt (package lists from the host's sources, fetched by the first
	// build that needs them; remove the directory to fetch newer ones), leaving the host's
	// apt and dpkg configuration, and Cache's native packages, alone.
	Arch string
	// Log, when set, gets one line per apt-get run.
	Log func(format string, args ...any)
	// foreign is set by Closure when Arch is not the native architecture (Cache is then
	// Cache/ARCH).
	foreign bool
}

// Closure returns names and everything they depend on (Depends and Pre-Depends, the first
// alternative of each), except the packages in exclude and what depends only through them,
// fetching what the cache lacks. The result is sorted by name.
func (f Fetcher) Closure(names, exclude []string) ([]Package, error) {
	if f.Arch != "" {
		native, err := exec.Command("dpkg", "--print-architecture").Output()
		if err != nil {
			return nil, fmt.Errorf("dpkg --print-architecture: %w", err)
		}
		if f.foreign = strings.TrimSpace(string(native)) != f.Arch; f.foreign {
			f.Cache = filepath.Join(f.Cache, f.Arch)
		}
	}
	got := map[string]Package{}
	queue := slices.Clone(names)
	for len(queue) > 0 {
		var missing []string
		for _, n := range queue {
			if _, ok := got[n]; ok || slices.Contains(exclude, n) || slices.Contains(missing, n) {
				continue
			}
			missing = append(missing, n)
		}
		queue = nil
		if len(missing) == 0 {
			break
		}
		if err := f.fetch(missing); err != nil {
			return nil, err
		}
		for _, n := range missing {
			p, err := f.cached(n)
			if err != nil {
				return nil, err
			}
			got[n] = p
			queue = append(queue, p.Depends...)
		}
	}
	out := make([]Package, 0, len(got))
	for _, p := range got {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (f Fetcher) debs(name string) ([]string, error) {
	if !f.foreign {
		return filepath.Glob(filepath.Join(f.Cache, name+"_*.deb"))
	}
	var out []string
	for _, a := range []string{f.Arch, "all"} {
		m, err := filepath.Glob(filepath.Join(f.Cache, name+"_*_"+a+".deb"))
		if err != nil {
			return nil, err
		}
		out = append(out, m...)
	}
	return out, nil
}

// aptOptions are the apt-get options that fetch f.Arch: none for the native architecture,
// else apt state of the architecture's own in the cache (set up, and its package lists
// fetched, on first use).
func (f Fetcher) aptOptions() ([]string, error) {
	// As root, apt would hand the download to its _apt user, who may not write the cache.
	opts := []string{"-q", "-o", "APT::Sandbox::User=root"}
	if !f.foreign {
		return opts, nil
	}
	state, err := filepath.Abs(filepath.Join(f.Cache, "apt"))
	if err != nil {
		return nil, err
	}
	opts = append(opts, "-o", "APT::Architecture="+f.Arch, "-o", "APT::Architectures="+f.Arch,
		"-o", "Dir::State::Lists="+filepath.Join(state, "lists"), "-o", "Dir::Cache="+filepath.Join(state, "cache"),
		"-o", "Dir::State::status="+filepath.Join(state, "status"))
	lists, err := filepath.Glob(filepath.Join(state, "lists", "*_Packages*"))
	if err != nil || len(lists) > 0 {
		return opts, err
	}
	for _, d := range []string{"lists/partial", "cache/archives/partial"} {
		if err := os.MkdirAll(filepath.Join(state, d), 0o755); err != nil {
			return nil, fmt.Errorf("apt state for %s: %w", f.Arch, err)
		}
	}
	if err := os.WriteFile(filepath.Join(state, "status"), nil, 0o644); err != nil {
		return nil, fmt.Errorf("apt state for %s: %w", f.Arch, err)
	}
	if f.Log != nil {
		f.Log("apt-get update for %s (into %s)", f.Arch, state)
	}
	if out, err := exec.Command("apt-get", append(opts, "update")...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("apt-get update for %s: %w\n%s", f.Arch, err, out)
	}
	return opts, nil
}

// fetch downloads those of names that have no .deb in the cache, in one apt-get run.
func (f Fetcher) fetch(names []string) error {
	var need []string
	for _, n := range names {
		m, err := f.debs(n)
		if err != nil {
			return err
		}
		if len(m) == 0 {
			need = append(need, n)
		}
	}
	if len(need) == 0 {
		return nil
	}
	if err := os.MkdirAll(f.Cache, 0o755); err != nil {
		return fmt.Errorf("package cache: %w", err)
	}
	opts, err := f.aptOptions()
	if err != nil {
		return err
	}
	if f.Log != nil {
		f.Log("apt-get download %s (into %s)", strings.Join(need, " "), f.Cache)
	}
	cmd := exec.Command("apt-get", append(append(opts, "download"), need...)...)
	cmd.Dir = f.Cache
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("apt-get download %s: %w\n%s", strings.Join(need, " "), err, out)
	}
	return nil
}

// cached reads the control fields of name's .deb in the cache.
func (f Fetcher) cached(name string) (Package, error) {
	m, err := f.debs(name)
	if err != nil {
		return Package{}, err
	}
	switch len(m) {
	case 0:
		return Package{}, fmt.Errorf("package %s: apt-get download left no %s_*.deb in %s", name, name, f.Cache)
	case 1:
	default:
		return Package{}, fmt.Errorf("package %s: several versions in %s (%s): remove the old ones", name, f.Cache, strings.Join(m, ", "))
	}
	out, err := exec.Command("dpkg-deb", "--field", m[0], "Package", "Version", "Architecture", "Depends", "Pre-Depends").Output()
	if err != nil {
		return Package{}, fmt.Errorf("dpkg-deb --field %s: %w", m[0], err)
	}
	fields := ParseControl(out)
	p := Package{Name: fields["Package"], Version: fields["Version"], Arch: fields["Architecture"], File: m[0]}
	if p.Name != name {
		return Package{}, fmt.Errorf("%s holds package %q, not %s", m[0], p.Name, name)
	}
	if f.Arch != "" && p.Arch != f.Arch && p.Arch != "all" {
		return Package{}, fmt.Errorf("%s is for %s, not %s", m[0], p.Arch, f.Arch)
	}
	p.Depends = append(ParseDepends(fields["Pre-Depends"]), ParseDepends(fields["Depends"])...)
	return p, nil
}

// ParseControl reads deb822 control fields ("Name: value", continuation lines start with a
// space) into a map.
func ParseControl(data []byte) map[string]string {
	fields := map[string]string{}
	last := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if (strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t")) && last != "" {
			fields[last] += "\n" + strings.TrimSpace(line)
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		last = strings.TrimSpace(k)
		fields[last] = strings.TrimSpace(v)
	}
	return fields
}

// ParseDepends returns the package names a Depends field asks for: of "a (>= 1) | b, c:any"
// the first alternative of each group without version or architecture: [a c].
func ParseDepends(field string) []string {
	var out []string
	for _, group := range strings.Split(field, ",") {
		alt, _, _ := strings.Cut(group, "|")
		name, _, _ := strings.Cut(strings.TrimSpace(alt), " ")
		name, _, _ = strings.Cut(name, "(")
		name, _, _ = strings.Cut(name, ":")
		if name = strings.TrimSpace(name); name != "" {
			out = append(out, name)
		}
	}
	return out
}

// Unpack lays the packages' data out in a new tree, in order: a later package's file replaces
// an earlier one's. Hard links become copies. Ownership is kept as the package has it.
func Unpack(pkgs []Package) (*oci.Tree, error) {
	t := oci.NewTree()
	for _, p := range pkgs {
		cmd := exec.Command("dpkg-deb", "--fsys-tarfile", p.File)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("dpkg-deb --fsys-tarfile %s: %w", p.File, err)
		}
		readErr := addTar(t, stdout)
		_, _ = io.Copy(io.Discard, stdout)
		if err := cmd.Wait(); err != nil {
			return nil, fmt.Errorf("dpkg-deb --fsys-tarfile %s: %w: %s", p.File, err, stderr.String())
		}
		if readErr != nil {
			return nil, fmt.Errorf("package %s (%s): %w", p.Name, p.File, readErr)
		}
	}
	return t, nil
}

func addTar(t *oci.Tree, r io.Reader) error {
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		p := path.Clean("/" + hdr.Name)
		if p == "/" {
			continue
		}
		e := oci.Entry{Path: p, Mode: oci.FileMode(hdr.Mode), UID: hdr.Uid, GID: hdr.Gid}
		switch hdr.Typeflag {
		case tar.TypeDir:
			e.Type = oci.Dir
		case tar.TypeReg:
			e.Type = oci.File
			if e.Data, err = io.ReadAll(tr); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
		case tar.TypeSymlink:
			e.Type, e.Linkname, e.Mode = oci.Symlink, hdr.Linkname, 0o777
		case tar.TypeLink:
			src, ok := t.Get(hdr.Linkname)
			if !ok || src.Type != oci.File {
				return fmt.Errorf("%s: hard link to %s, which is no file before it", p, hdr.Linkname)
			}
			e.Type, e.Data = oci.File, src.Data
		default:
			return fmt.Errorf("%s: entry type %q not supported", p, hdr.Typeflag)
		}
		if err := t.Add(e); err != nil {
			return err
		}
	}
}
