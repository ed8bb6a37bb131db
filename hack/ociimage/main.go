package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
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
}

func run(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: ociimage build|rootfs|list ...")
	}
	cmd, args := args[0], args[1:]
	if cmd == "list" {
		for _, n := range recipeNames() {
			fmt.Printf("%s\t%s\n", n, recipes()[n].Doc)
		}
		return nil
	}
	if cmd != "build" && cmd != "rootfs" {
		return fmt.Errorf("unknown command %q (build, rootfs, list)", cmd)
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
	if err := fl.Parse(args[1:]); err != nil {
		return err
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
		base, err := baseTree(r, o)
		if err != nil {
			return fmt.Errorf("recipe %s: %w", name, err)
		}
		return oci.WriteEntries(o.out, base.Entries())
	}
	img, err := buildImage(name, r, o, epoch)
	if err != nil {
		return fmt.Errorf("recipe %s: %w", name, err)
	}
	tags := []string(o.tags)
	if len(tags) == 0 {
		tags = r.Names
	}
	digest, err := writeArchive(o.out, img, tags)
	if err != nil {
		return err
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

// baseTree is the recipe's Debian part: its selection from the packages (fetched into
// o.debs), or from the installed root o.sourceRoot. Nil when the recipe has none.
func baseTree(r recipe, o options) (*oci.Tree, error) {
	if len(r.Packages) == 0 {
		return nil, nil
	}
	var src rootfs.Source
	if o.sourceRoot != "" {
		src = rootfs.DirSource{Root: o.sourceRoot}
	} else {
		f := debian.Fetcher{Cache: o.debs, Log: func(format string, args ...any) {
			fmt.Fprintf(os.Stderr, "ociimage: "+format+"\n", args...)
		}}
		pkgs, err := f.Closure(r.Packages, r.Exclude)
		if err != nil {
			return nil, err
		}
		var list []string
		for _, p := range pkgs {
			list = append(list, p.Name+"="+p.Version)
		}
		fmt.Fprintf(os.Stderr, "ociimage: packages: %s\n", strings.Join(list, " "))
		t, err := debian.Unpack(pkgs)
		if err != nil {
			return nil, err
		}
		src = rootfs.TreeSource{Tree: t}
	}
	out := oci.NewTree()
	if err := r.Selection.Apply(src, out); err != nil {
		return nil, err
	}
	return out, nil
}

// buildImage assembles the recipe's image: the Debian part as the lower layer (if any), the
// inputs as the upper one.
func buildImage(name string, r recipe, o options, created time.Time) (oci.Image, error) {
	given := map[string]string{}
	for _, in := range o.inputs {
		k, v, ok := strings.Cut(in, "=")
		if !ok || k == "" || v == "" {
			return oci.Image{}, fmt.Errorf("--input %q: want NAME=FILE", in)
		}
		given[k] = v
	}
	img := oci.Image{Created: created, Config: r.Config}
	base, err := baseTree(r, o)
	if err != nil {
		return oci.Image{}, err
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
				return oci.Image{}, fmt.Errorf("input %s (/%s) not given: --input %s=FILE", in.Name, in.Path, in.Name)
			}
			delete(given, in.Name)
			data, err := os.ReadFile(file)
			if err != nil {
				return oci.Image{}, fmt.Errorf("input %s: %w", in.Name, err)
			}
			if err := top.AddFile(in.Path, data, in.Mode); err != nil {
				return oci.Image{}, err
			}
			names = append(names, "/"+in.Path)
		}
		img.Layers = append(img.Layers, top)
		img.History = append(img.History, "ociimage "+name+": "+strings.Join(names, " "))
	}
	for k := range given {
		return oci.Image{}, fmt.Errorf("--input %s: recipe %s takes no such input", k, name)
	}
	if len(o.labels) > 0 {
		img.Config.Labels = map[string]string{}
		for k, v := range r.Config.Labels {
			img.Config.Labels[k] = v
		}
		for _, l := range o.labels {
			k, v, ok := strings.Cut(l, "=")
			if !ok || k == "" {
				return oci.Image{}, fmt.Errorf("--label %q: want KEY=VALUE", l)
			}
			img.Config.Labels[k] = v
		}
	}
	return img, nil
}

// writeArchive writes the archive next to out and renames it into place, so a failed build
// leaves no half archive.
func writeArchive(out string, img oci.Image, tags []string) (string, error) {
	var buf bytes.Buffer
	digest, err := oci.Write(&buf, img, tags)
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
