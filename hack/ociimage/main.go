package main

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/kipvs/kipvs/hack/ociimage/debian"
	"github.com/kipvs/kipvs/hack/ociimage/oci"
	"github.com/kipvs/kipvs/hack/ociimage/rootfs"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "ociimage:", err)
		os.Exit(1)
	}
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

type options struct {
	out, debs, sourceRoot, digestFile string
	inputs, tags, labels              multiFlag
	// arches are the Debian architectures to build for (--arch); [""] is the host's.
	arches      []string
	packagesOut string
}

// multiarchTuples are the Debian multiarch tuples of the architectures --arch takes: where
// an architecture's shared libraries and its loader's search path are.
var multiarchTuples = map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}

func run(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: ociimage build|rootfs|unpack|list ...")
	}
	cmd, args := args[0], args[1:]
	if cmd == "list" {
		for _, n := range recipeNames() {
			fmt.Printf("%s\t%s\n", n, recipes()[n].Doc)
		}
		return nil
	}
	if cmd == "unpack" {
		return unpack(args)
	}
	if cmd != "build" && cmd != "rootfs" {
		return fmt.Errorf("unknown command %q (build, rootfs, unpack, list)", cmd)
	}
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return fmt.Errorf("%s: name a recipe first (%s)", cmd, strings.Join(recipeNames(), ", "))
	}
	name := args[0]
	r, ok := recipes()[name]
	if !ok {
		return fmt.Errorf("no recipe %q (%s)", name, strings.Join(recipeNames(), ", "))
	}
	var o options
	fl := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fl.StringVar(&o.out, "out", "", "the archive (build) or directory (rootfs) to write")
	fl.StringVar(&o.debs, "debs", filepath.Join(".cache", "debs"), "cache of downloaded .deb files")
	fl.StringVar(&o.sourceRoot, "source-root", "", "take the Debian part from this installed root (\"/\") instead of fetching packages")
	fl.StringVar(&o.digestFile, "digest-file", "", "also write the manifest digest to this file")
	fl.Var(&o.inputs, "input", "NAME=FILE: a file of this build the recipe takes (repeatable)")
	fl.Var(&o.tags, "tag", "a name for the image, e.g. registry.k8s.io/pause:3.10.1 (repeatable; default: the recipe's)")
	fl.Var(&o.labels, "label", "KEY=VALUE: an image label (repeatable)")
	arch := fl.String("arch", "", "Debian architectures to build for, comma-separated (amd64, arm64; default: the host's, one image); "+
		"more than one writes an image index with one image each, and {arch} in an --input FILE is replaced by each")
	fl.StringVar(&o.packagesOut, "packages-out", "", "also write the Debian packages each architecture's image took (JSON: name, version, architecture, file, sha256) to this file")
	if err := fl.Parse(args[1:]); err != nil {
		return err
	}
	o.arches = []string{""}
	if *arch != "" {
		o.arches = strings.Split(*arch, ",")
		for _, a := range o.arches {
			if _, ok := multiarchTuples[a]; !ok {
				return fmt.Errorf("--arch %s: not one of amd64, arm64", a)
			}
		}
	}
	if cmd == "rootfs" && len(o.arches) > 1 {
		return fmt.Errorf("rootfs %s: one --arch at a time", name)
	}
	if fl.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fl.Args())
	}
	if o.out == "" {
		return fmt.Errorf("%s %s: --out is required", cmd, name)
	}
	epoch, err := sourceDateEpoch()
	if err != nil {
		return err
	}
	if cmd == "rootfs" {
		base, _, err := baseTree(r, o, o.arches[0])
		if err != nil {
			return fmt.Errorf("recipe %s: %w", name, err)
		}
		return oci.WriteEntries(o.out, base.Entries())
	}
	var imgs []oci.Image
	used := map[string][]usedPackage{}
	for _, a := range o.arches {
		img, pkgs, err := buildImage(name, r, o, epoch, a)
		if err != nil {
			if a != "" {
				return fmt.Errorf("recipe %s for %s: %w", name, a, err)
			}
			return fmt.Errorf("recipe %s: %w", name, err)
		}
		imgs = append(imgs, img)
		key := a
		if key == "" {
			key = runtime.GOARCH
		}
		if used[key], err = packagesUsed(pkgs); err != nil {
			return err
		}
	}
	tags := []string(o.tags)
	if len(tags) == 0 {
		tags = r.Names
	}
	digest, err := writeArchive(o.out, imgs, tags, epoch)
	if err != nil {
		return err
	}
	if o.packagesOut != "" {
		if err := writeJSON(o.packagesOut, used); err != nil {
			return err
		}
	}
	if o.digestFile != "" {
		if err := os.WriteFile(o.digestFile, []byte(digest+"\n"), 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "ociimage: wrote %s: %s as %s\n", o.out, digest, strings.Join(tags, ", "))
	fmt.Println(digest)
	return nil
}

func sourceDateEpoch() (time.Time, error) {
	v := os.Getenv("SOURCE_DATE_EPOCH")
	if v == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: not a number of seconds: %w", v, err)
	}
	return time.Unix(n, 0).UTC(), nil
}

// baseTree is the recipe's Debian part for arch ("" the host's): its selection from the
// packages (fetched into o.debs), which it returns too, or from the installed root
// o.sourceRoot. Nil when the recipe has none.
func baseTree(r recipe, o options, arch string) (*oci.Tree, []debian.Package, error) {
	if len(r.Packages) == 0 {
		return nil, nil, nil
	}
	sel := r.Selection
	if arch != "" {
		sel.Multiarch = multiarchTuples[arch]
	}
	var src rootfs.Source
	var pkgs []debian.Package
	if o.sourceRoot != "" {
		if arch != "" {
			return nil, nil, fmt.Errorf("--source-root takes the host's architecture: no --arch")
		}
		src = rootfs.DirSource{Root: o.sourceRoot}
	} else {
		f := debian.Fetcher{Cache: o.debs, Arch: arch, Log: func(format string, args ...any) {
			fmt.Fprintf(os.Stderr, "ociimage: "+format+"\n", args...)
		}}
		var err error
		pkgs, err = f.Closure(r.Packages, r.Exclude)
		if err != nil {
			return nil, nil, err
		}
		var list []string
		for _, p := range pkgs {
			list = append(list, p.Name+"="+p.Version)
		}
		fmt.Fprintf(os.Stderr, "ociimage: packages: %s\n", strings.Join(list, " "))
		t, err := debian.Unpack(pkgs)
		if err != nil {
			return nil, nil, err
		}
		src = rootfs.TreeSource{Tree: t}
	}
	out := oci.NewTree()
	if err := sel.Apply(src, out); err != nil {
		return nil, nil, err
	}
	return out, pkgs, nil
}

// buildImage assembles the recipe's image for arch ("" the host's): the Debian part as the
// lower layer (if any), the inputs as the upper one. It returns the Debian packages it took.
func buildImage(name string, r recipe, o options, created time.Time, arch string) (oci.Image, []debian.Package, error) {
	given := map[string]string{}
	for _, in := range o.inputs {
		k, v, ok := strings.Cut(in, "=")
		if !ok || k == "" || v == "" {
			return oci.Image{}, nil, fmt.Errorf("--input %q: want NAME=FILE", in)
		}
		if strings.Contains(v, "{arch}") {
			if arch == "" {
				return oci.Image{}, nil, fmt.Errorf("--input %q: {arch} needs --arch", in)
			}
			v = strings.ReplaceAll(v, "{arch}", arch)
		}
		given[k] = v
	}
	img := oci.Image{Created: created, Config: r.Config, Arch: arch}
	base, pkgs, err := baseTree(r, o, arch)
	if err != nil {
		return oci.Image{}, nil, err
	}
	if base != nil {
		img.Layers = append(img.Layers, base)
		img.History = append(img.History, "ociimage "+name+": Debian packages "+strings.Join(r.Packages, " "))
	}
	if len(r.Inputs) > 0 {
		top := oci.NewTree()
		var names []string
		for _, in := range r.Inputs {
			file, ok := given[in.Name]
			if !ok {
				return oci.Image{}, nil, fmt.Errorf("input %s (/%s) not given: --input %s=FILE", in.Name, in.Path, in.Name)
			}
			delete(given, in.Name)
			data, err := os.ReadFile(file)
			if err != nil {
				return oci.Image{}, nil, fmt.Errorf("input %s: %w", in.Name, err)
			}
			if err := checkMachine(data, arch); err != nil {
				return oci.Image{}, nil, fmt.Errorf("input %s (%s): %w", in.Name, file, err)
			}
			if err := top.AddFile(in.Path, data, in.Mode); err != nil {
				return oci.Image{}, nil, err
			}
			names = append(names, "/"+in.Path)
		}
		img.Layers = append(img.Layers, top)
		img.History = append(img.History, "ociimage "+name+": "+strings.Join(names, " "))
	}
	for k := range given {
		return oci.Image{}, nil, fmt.Errorf("--input %s: recipe %s takes no such input", k, name)
	}
	if len(o.labels) > 0 {
		img.Config.Labels = map[string]string{}
		for k, v := range r.Config.Labels {
			img.Config.Labels[k] = v
		}
		for _, l := range o.labels {
			k, v, ok := strings.Cut(l, "=")
			if !ok || k == "" {
				return oci.Image{}, nil, fmt.Errorf("--label %q: want KEY=VALUE", l)
			}
			img.Config.Labels[k] = v
		}
	}
	return img, pkgs, nil
}

// elfMachines are the ELF machines of the architectures --arch takes.
var elfMachines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// checkMachine refuses an ELF input built for another machine than arch's (when arch is
// given), so an image never carries another architecture's binary.
func checkMachine(data []byte, arch string) error {
	want, ok := elfMachines[arch]
	if !ok || !bytes.HasPrefix(data, []byte(elf.ELFMAG)) {
		return nil
	}
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("not a readable ELF file: %w", err)
	}
	if f.Machine != want {
		return fmt.Errorf("an ELF file for %s, not %s (%s)", f.Machine, want, arch)
	}
	return nil
}

// usedPackage is one Debian package an image took, as --packages-out lists it.
type usedPackage struct {
	Name         string `json:"name"`
	Version      string `json:"version"`
	Architecture string `json:"architecture"`
	File         string `json:"file"`
	SHA256       string `json:"sha256"`
}

func packagesUsed(pkgs []debian.Package) ([]usedPackage, error) {
	out := []usedPackage{}
	for _, p := range pkgs {
		data, err := os.ReadFile(p.File)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(data)
		out = append(out, usedPackage{Name: p.Name, Version: p.Version, Architecture: p.Arch, File: filepath.Base(p.File), SHA256: hex.EncodeToString(sum[:])})
	}
	return out, nil
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// writeArchive writes the archive next to out and renames it into place, so a failed build
// leaves no half archive: one image as it is, several as an image index. It returns the
// manifest's digest, or the image index's.
func writeArchive(out string, imgs []oci.Image, tags []string, created time.Time) (string, error) {
	var buf bytes.Buffer
	var digest string
	var err error
	if len(imgs) == 1 {
		digest, err = oci.Write(&buf, imgs[0], tags)
	} else {
		digest, err = oci.WriteIndex(&buf, imgs, tags, created)
	}
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", err
	}
	tmp := out + ".tmp"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o644); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, out); err != nil {
		return "", err
	}
	return digest, nil
}

// unpack writes the file system of one architecture's image of a multi-platform archive
// (ociimage unpack ARCHIVE --arch ARCH --out DIR), e.g. to run it under qemu-user.
func unpack(args []string) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return errors.New("unpack: name the archive first")
	}
	fl := flag.NewFlagSet("unpack", flag.ContinueOnError)
	arch := fl.String("arch", "", "the architecture whose image to unpack")
	out := fl.String("out", "", "the directory to write")
	if err := fl.Parse(args[1:]); err != nil {
		return err
	}
	if *arch == "" || *out == "" {
		return errors.New("unpack: --arch and --out are required")
	}
	a, err := oci.ReadIndexArchiveFile(args[0])
	if err != nil {
		return err
	}
	for _, img := range a.Images {
		if img.Config.Architecture == *arch {
			return img.Unpack(*out)
		}
	}
	return fmt.Errorf("unpack: %s has no image for %s", args[0], *arch)
}
