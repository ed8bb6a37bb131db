package oci

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var epoch = time.Unix(1700000000, 0).UTC()

// sampleTree adds its entries in the order given, which is not the sorted one.
func sampleTree(t *testing.T, order []int) *Tree {
	t.Helper()
	adds := []func(*Tree) error{
		func(tr *Tree) error { return tr.AddFile("usr/local/bin/app", []byte("app binary"), 0o755) },
		func(tr *Tree) error { return tr.AddSymlink("usr/sbin/tool", "../local/bin/app") },
		func(tr *Tree) error { return tr.AddDir("tmp", 0o777|fs.ModeSticky) },
		func(tr *Tree) error { return tr.AddFile("/etc/protocols", []byte("tcp 6 TCP\n"), 0o644) },
		func(tr *Tree) error { return tr.AddFile("usr/bin/su", []byte("su"), 0o755|fs.ModeSetuid) },
	}
	tr := NewTree()
	for _, i := range order {
		if err := adds[i](tr); err != nil {
			t.Fatal(err)
		}
	}
	return tr
}

func writeImage(t *testing.T, img Image, names []string) ([]byte, string) {
	t.Helper()
	var buf bytes.Buffer
	digest, err := Write(&buf, img, names)
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), digest
}

// TestWriteReadBack writes an image and reads every part of it back: the archive's members,
// the index entries and their names, the manifest, the config, and each layer's entries
// (sorted, parents created, modes with the special bits, root-owned, one time on all).
func TestWriteReadBack(t *testing.T) {
	cfg := Config{Entrypoint: []string{"/usr/local/bin/app"}, Cmd: []string{"run"}, User: "65535:65535",
		Env: []string{"PATH=/usr/local/bin"}, Labels: map[string]string{"a": "b"}}
	top := NewTree()
	if err := top.AddFile("etc/extra", []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	img := Image{Layers: []*Tree{sampleTree(t, []int{0, 1, 2, 3, 4}), top}, Config: cfg, Created: epoch, History: []string{"base", "top"}}
	names := []string{"registry.example/app:1", "registry.example/app:latest"}
	data, digest := writeImage(t, img, names)

	a, err := ReadArchive(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if a.ManifestDigest != digest {
		t.Errorf("index names manifest %s, Write returned %s", a.ManifestDigest, digest)
	}
	var got []string
	for _, m := range a.Index.Manifests {
		got = append(got, m.Annotations[AnnotationImageName]+" "+m.Annotations[AnnotationRefName]+" "+m.Platform.OS+"/"+m.Platform.Architecture)
	}
	want := []string{"registry.example/app:1 registry.example/app:1 linux/amd64", "registry.example/app:latest registry.example/app:latest linux/amd64"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("index entries (-want +got):\n%s", diff)
	}
	if a.Manifest.MediaType != MediaTypeManifest || a.Manifest.Config.MediaType != MediaTypeConfig || len(a.Manifest.Layers) != 2 {
		t.Errorf("manifest: %+v", a.Manifest)
	}
	if diff := cmp.Diff(cfg, a.Config.Config); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
	if a.Config.Created != "2023-11-14T22:13:20Z" || a.Config.OS != "linux" || a.Config.Architecture != "amd64" {
		t.Errorf("config created %q os %q arch %q", a.Config.Created, a.Config.OS, a.Config.Architecture)
	}
	if len(a.Config.History) != 2 || a.Config.History[0].CreatedBy != "base" || a.Config.History[1].CreatedBy != "top" {
		t.Errorf("history %+v", a.Config.History)
	}

	type row struct {
		Path, Link string
		Type       EntryType
		Mode       fs.FileMode
		Data       string
		UID, GID   int
	}
	rows := func(es []Entry) []row {
		var out []row
		for _, e := range es {
			out = append(out, row{e.Path, e.Linkname, e.Type, e.Mode, string(e.Data), e.UID, e.GID})
		}
		return out
	}
	wantBase := []row{
		{Path: "etc", Type: Dir, Mode: 0o755},
		{Path: "etc/protocols", Type: File, Mode: 0o644, Data: "tcp 6 TCP\n"},
		{Path: "tmp", Type: Dir, Mode: 0o777 | fs.ModeSticky},
		{Path: "usr", Type: Dir, Mode: 0o755},
		{Path: "usr/bin", Type: Dir, Mode: 0o755},
		{Path: "usr/bin/su", Type: File, Mode: 0o755 | fs.ModeSetuid, Data: "su"},
		{Path: "usr/local", Type: Dir, Mode: 0o755},
		{Path: "usr/local/bin", Type: Dir, Mode: 0o755},
		{Path: "usr/local/bin/app", Type: File, Mode: 0o755, Data: "app binary"},
		{Path: "usr/sbin", Type: Dir, Mode: 0o755},
		{Path: "usr/sbin/tool", Link: "../local/bin/app", Type: Symlink, Mode: 0o777},
	}
	if diff := cmp.Diff(wantBase, rows(a.Layers[0])); diff != "" {
		t.Errorf("lower layer (-want +got):\n%s", diff)
	}
	wantTop := []row{{Path: "etc", Type: Dir, Mode: 0o755}, {Path: "etc/extra", Type: File, Mode: 0o600, Data: "x"}}
	if diff := cmp.Diff(wantTop, rows(a.Layers[1])); diff != "" {
		t.Errorf("upper layer (-want +got):\n%s", diff)
	}

	// Times and owner names in the layer tar itself.
	raw, err := LayerTar(img.Layers[0], epoch)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(bytes.NewReader(raw))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !hdr.ModTime.Equal(epoch) || hdr.Uname != "" || hdr.Gname != "" {
			t.Errorf("%s: mtime %v uname %q gname %q, want %v and no names", hdr.Name, hdr.ModTime, hdr.Uname, hdr.Gname, epoch)
		}
	}

	// The archive's members, and the docker-archive manifest.json for docker load.
	wantFiles := []string{"blobs/", "blobs/sha256/"}
	var blobs []string
	for _, l := range a.Manifest.Layers {
		blobs = append(blobs, "blobs/sha256/"+strings.TrimPrefix(l.Digest, "sha256:"))
	}
	blobs = append(blobs, "blobs/sha256/"+strings.TrimPrefix(a.Manifest.Config.Digest, "sha256:"), "blobs/sha256/"+strings.TrimPrefix(digest, "sha256:"))
	slices.Sort(blobs)
	wantFiles = append(append(wantFiles, blobs...), "oci-layout", "index.json", "manifest.json")
	if diff := cmp.Diff(wantFiles, a.Files); diff != "" {
		t.Errorf("archive members (-want +got):\n%s", diff)
	}
	var dm []dockerManifest
	if err := json.Unmarshal(member(t, data, "manifest.json"), &dm); err != nil {
		t.Fatal(err)
	}
	if len(dm) != 1 || !slices.Equal(dm[0].RepoTags, names) || dm[0].Config != "blobs/sha256/"+strings.TrimPrefix(a.Manifest.Config.Digest, "sha256:") || len(dm[0].Layers) != 2 {
		t.Errorf("manifest.json: %+v", dm)
	}
	if got := string(member(t, data, "oci-layout")); got != `{"imageLayoutVersion":"1.0.0"}` {
		t.Errorf("oci-layout: %s", got)
	}
}

func member(t *testing.T, archive []byte, name string) []byte {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		hdr, err := tr.Next()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if hdr.Name == name {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
}

// TestWriteReproducible: the same content gives the same bytes and digest whatever order the
// tree was filled in; a different time, file content, mode or config gives another digest.
func TestWriteReproducible(t *testing.T) {
	cfg := Config{Entrypoint: []string{"/app"}, Labels: map[string]string{"z": "1", "a": "2", "m": "3"}}
	a, da := writeImage(t, Image{Layers: []*Tree{sampleTree(t, []int{0, 1, 2, 3, 4})}, Config: cfg, Created: epoch}, []string{"x:1"})
	b, db := writeImage(t, Image{Layers: []*Tree{sampleTree(t, []int{4, 3, 2, 1, 0})}, Config: cfg, Created: epoch}, []string{"x:1"})
	if da != db || !bytes.Equal(a, b) {
		t.Fatalf("same content, other insertion order: digests %s and %s (archives equal: %v)", da, db, bytes.Equal(a, b))
	}
	for name, img := range map[string]Image{
		"another time":   {Layers: []*Tree{sampleTree(t, []int{0, 1, 2, 3, 4})}, Config: cfg, Created: epoch.Add(time.Second)},
		"another config": {Layers: []*Tree{sampleTree(t, []int{0, 1, 2, 3, 4})}, Config: Config{Entrypoint: []string{"/other"}}, Created: epoch},
		"another file": func() Image {
			tr := sampleTree(t, []int{0, 1, 2, 3, 4})
			if err := tr.AddFile("usr/local/bin/app", []byte("app binary 2"), 0o755); err != nil {
				t.Fatal(err)
			}
			return Image{Layers: []*Tree{tr}, Config: cfg, Created: epoch}
		}(),
		"another mode": func() Image {
			tr := sampleTree(t, []int{0, 1, 2, 3, 4})
			if err := tr.AddFile("usr/local/bin/app", []byte("app binary"), 0o700); err != nil {
				t.Fatal(err)
			}
			return Image{Layers: []*Tree{tr}, Config: cfg, Created: epoch}
		}(),
	} {
		if _, d := writeImage(t, img, []string{"x:1"}); d == da {
			t.Errorf("%s: the digest did not change (%s)", name, d)
		}
	}
	// The name is not part of the image: another name, same manifest digest.
	if _, d := writeImage(t, Image{Layers: []*Tree{sampleTree(t, []int{0, 1, 2, 3, 4})}, Config: cfg, Created: epoch}, []string{"y:2"}); d != da {
		t.Errorf("another name changed the manifest digest: %s, %s", da, d)
	}
}

func TestTreeConflicts(t *testing.T) {
	tr := NewTree()
	if err := tr.AddFile("a/b", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := tr.AddFile("a/b/c", nil, 0o644); err == nil {
		t.Error("a file under a file was accepted")
	}
	if err := tr.AddDir("a/b", 0o755); err == nil {
		t.Error("a directory over a file was accepted")
	}
	if err := tr.AddFile("/", nil, 0o644); err == nil {
		t.Error("the root as a file was accepted")
	}
	if err := tr.AddFile("../../x", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok := tr.Get("x"); !ok {
		t.Error(`"../../x" did not stay inside the tree as "x"`)
	}
}

// TestUnpack lays an archive out on disk and finds the files, modes and links.
func TestUnpack(t *testing.T) {
	data, _ := writeImage(t, Image{Layers: []*Tree{sampleTree(t, []int{0, 1, 2, 3, 4})}, Created: epoch}, []string{"x:1"})
	a, err := ReadArchive(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := a.Unpack(dir); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, "tmp"))
	if err != nil || fi.Mode() != fs.ModeDir|fs.ModeSticky|0o777 {
		t.Errorf("tmp: %v %v", fi.Mode(), err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "usr/sbin/tool"))
	if err != nil || string(b) != "app binary" {
		t.Errorf("usr/sbin/tool -> app: %q %v", b, err)
	}
	fi, err = os.Stat(filepath.Join(dir, "usr/bin/su"))
	if err != nil || fi.Mode() != fs.ModeSetuid|0o755 {
		t.Errorf("usr/bin/su: %v %v", fi.Mode(), err)
	}
}

// TestReadArchiveRejectsCorruption: a flipped byte in a blob is found.
func TestReadArchiveRejectsCorruption(t *testing.T) {
	data, digest := writeImage(t, Image{Layers: []*Tree{sampleTree(t, []int{0})}, Created: epoch}, []string{"x:1"})
	i := bytes.Index(data, []byte(`"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json"`))
	if i < 0 {
		t.Fatal("manifest not found in the archive")
	}
	bad := slices.Clone(data)
	bad[i+len(`"schemaVersion":`)] = '3'
	if _, err := ReadArchive(bytes.NewReader(bad)); err == nil || !strings.Contains(err.Error(), "does not match its digest") {
		t.Errorf("a changed manifest (%s) was read without complaint: %v", digest, err)
	}
}

// TestWriteIndex writes an amd64 and an arm64 image as one index and reads it back: index.json
// names the image index once per name, the image index lists both manifests with their
// platforms, each the same manifest Write gives that image alone, and every blob checks out. The
// same images give the same archive; another arm64 image another index digest; two images for
// one platform are refused.
func TestWriteIndex(t *testing.T) {
	imgFor := func(arch, app string) Image {
		tr := sampleTree(t, []int{0, 1, 2, 3, 4})
		if err := tr.AddFile("usr/local/bin/app", []byte(app), 0o755); err != nil {
			t.Fatal(err)
		}
		return Image{Layers: []*Tree{tr}, Config: Config{Entrypoint: []string{"/usr/local/bin/app"}}, Created: epoch, Arch: arch}
	}
	write := func(imgs ...Image) ([]byte, string) {
		t.Helper()
		var buf bytes.Buffer
		d, err := WriteIndex(&buf, imgs, []string{"x:1", "x:latest"}, epoch)
		if err != nil {
			t.Fatal(err)
		}
		return buf.Bytes(), d
	}
	amd, arm := imgFor("amd64", "app amd64"), imgFor("arm64", "app arm64")
	raw, digest := write(amd, arm)
	a, err := ReadIndexArchive(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if a.IndexDigest != digest {
		t.Errorf("WriteIndex returned %s, index.json names %s", digest, a.IndexDigest)
	}
	var names []string
	for _, e := range a.Index.Manifests {
		names = append(names, e.Annotations[AnnotationRefName]+"="+e.Annotations[AnnotationImageName])
	}
	if want := []string{"x:1=x:1", "x:latest=x:latest"}; !slices.Equal(names, want) {
		t.Errorf("index.json names %v, want %v", names, want)
	}
	if len(a.Images) != 2 {
		t.Fatalf("image index lists %d images, want 2", len(a.Images))
	}
	for i, img := range []Image{amd, arm} {
		_, alone := writeImage(t, img, []string{"x:1"})
		m := a.ImageIndex.Manifests[i]
		if m.Platform == nil || m.Platform.OS != "linux" || m.Platform.Architecture != img.Arch || m.Digest != alone {
			t.Errorf("image index entry %d: %+v platform %+v, want linux/%s manifest %s", i, m, m.Platform, img.Arch, alone)
		}
		at := slices.IndexFunc(a.Images[i].Layers[0], func(e Entry) bool { return e.Path == "usr/local/bin/app" })
		if at < 0 || string(a.Images[i].Layers[0][at].Data) != "app "+img.Arch {
			t.Errorf("%s image: /usr/local/bin/app missing or not its own (index %d)", img.Arch, at)
		}
	}
	for _, f := range a.Files {
		if f == "manifest.json" {
			t.Error("the multi-platform archive has a docker manifest.json")
		}
	}
	if again, d := write(amd, arm); d != digest || !bytes.Equal(again, raw) {
		t.Errorf("same images again: index %s, first %s (archives equal: %v)", d, digest, bytes.Equal(again, raw))
	}
	if _, d := write(amd, imgFor("arm64", "app arm64 v2")); d == digest {
		t.Errorf("another arm64 binary kept the index digest %s", d)
	}
	if _, err := WriteIndex(io.Discard, []Image{amd, imgFor("amd64", "other")}, nil, epoch); err == nil || !strings.Contains(err.Error(), "two images for linux/amd64") {
		t.Errorf("two amd64 images: err = %v, want two images for linux/amd64", err)
	}
}
