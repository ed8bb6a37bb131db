package oci

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Archive is an OCI image-layout archive read back: its index, and the manifest, config and
// layers of the image it holds (all index entries must name the same manifest).
type Archive struct {
	Index          Index
	ManifestDigest string
	Manifest       Manifest
	Config         ImageConfig
	// Layers are the layers' entries in archive order, bottom layer first.
	Layers [][]Entry
	// Files are the archive's own member names, in order.
	Files []string
}

// ReadArchive reads and checks an archive Write wrote: every blob's digest and size, the
// layers' diff IDs.
func ReadArchive(r io.Reader) (*Archive, error) {
	l, err := readLayout(r)
	if err != nil {
		return nil, err
	}
	if len(l.index.Manifests) == 0 {
		return nil, fmt.Errorf("index.json: no manifests")
	}
	for _, m := range l.index.Manifests {
		if m.Digest != l.index.Manifests[0].Digest {
			return nil, fmt.Errorf("index.json: entries name different manifests (%s, %s)", l.index.Manifests[0].Digest, m.Digest)
		}
	}
	a, err := l.image(l.index.Manifests[0])
	if err != nil {
		return nil, err
	}
	a.Index = l.index
	return a, nil
}

// IndexArchive is a multi-platform archive WriteIndex wrote, read back.
type IndexArchive struct {
	// Index is index.json; ImageIndex the image index blob its entries name.
	Index       Index
	IndexDigest string
	ImageIndex  Index
	// Images are the platforms' images, in ImageIndex's order.
	Images []*Archive
	Files  []string
}

// ReadIndexArchive reads and checks an archive WriteIndex wrote, as ReadArchive does one
// image, for each platform.
func ReadIndexArchive(r io.Reader) (*IndexArchive, error) {
	l, err := readLayout(r)
	if err != nil {
		return nil, err
	}
	a := &IndexArchive{Index: l.index, Files: l.files}
	if len(l.index.Manifests) == 0 {
		return nil, fmt.Errorf("index.json: no entries")
	}
	top := l.index.Manifests[0]
	for _, m := range l.index.Manifests {
		if m.Digest != top.Digest || m.MediaType != MediaTypeIndex {
			return nil, fmt.Errorf("index.json: entry %s (%s) is not the one image index %s", m.Digest, m.MediaType, top.Digest)
		}
	}
	a.IndexDigest = top.Digest
	raw, err := l.blob(top)
	if err != nil {
		return nil, fmt.Errorf("image index: %w", err)
	}
	if err := json.Unmarshal(raw, &a.ImageIndex); err != nil {
		return nil, fmt.Errorf("image index: %w", err)
	}
	for _, m := range a.ImageIndex.Manifests {
		if m.MediaType != MediaTypeManifest || m.Platform == nil {
			return nil, fmt.Errorf("image index: entry %s is no image manifest with a platform", m.Digest)
		}
		img, err := l.image(m)
		if err != nil {
			return nil, fmt.Errorf("%s/%s: %w", m.Platform.OS, m.Platform.Architecture, err)
		}
		if img.Config.Architecture != m.Platform.Architecture || img.Config.OS != m.Platform.OS {
			return nil, fmt.Errorf("image index: entry for %s/%s holds an image for %s/%s", m.Platform.OS, m.Platform.Architecture, img.Config.OS, img.Config.Architecture)
		}
		a.Images = append(a.Images, img)
	}
	return a, nil
}

// ReadIndexArchiveFile reads the multi-platform archive at path.
func ReadIndexArchiveFile(path string) (*IndexArchive, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	a, err := ReadIndexArchive(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return a, nil
}

// layout is an archive's members and index.json.
type layout struct {
	files   []string
	members map[string][]byte
	index   Index
}

func readLayout(r io.Reader) (*layout, error) {
	l := &layout{members: map[string][]byte{}}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read archive: %w", err)
		}
		l.files = append(l.files, hdr.Name)
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, fmt.Errorf("read archive %s: %w", hdr.Name, err)
		}
		l.members[hdr.Name] = data
	}
	if err := json.Unmarshal(l.members["index.json"], &l.index); err != nil {
		return nil, fmt.Errorf("index.json: %w", err)
	}
	return l, nil
}

// blob is d's content, checked against d's digest and size.
func (l *layout) blob(d Descriptor) ([]byte, error) {
	name, ok := strings.CutPrefix(d.Digest, "sha256:")
	if !ok {
		return nil, fmt.Errorf("blob %q: not a sha256 digest", d.Digest)
	}
	data, ok := l.members["blobs/sha256/"+name]
	if !ok {
		return nil, fmt.Errorf("blob %s: not in the archive", d.Digest)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != name {
		return nil, fmt.Errorf("blob %s: content does not match its digest", d.Digest)
	}
	if int64(len(data)) != d.Size {
		return nil, fmt.Errorf("blob %s: %d bytes, descriptor says %d", d.Digest, len(data), d.Size)
	}
	return data, nil
}

// image reads the image whose manifest man names.
func (l *layout) image(man Descriptor) (*Archive, error) {
	a := &Archive{Files: l.files, ManifestDigest: man.Digest}
	manJSON, err := l.blob(man)
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	if err := json.Unmarshal(manJSON, &a.Manifest); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	cfgJSON, err := l.blob(a.Manifest.Config)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if err := json.Unmarshal(cfgJSON, &a.Config); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if len(a.Config.RootFS.DiffIDs) != len(a.Manifest.Layers) {
		return nil, fmt.Errorf("config lists %d diff IDs for %d layers", len(a.Config.RootFS.DiffIDs), len(a.Manifest.Layers))
	}
	for i, ld := range a.Manifest.Layers {
		gz, err := l.blob(ld)
		if err != nil {
			return nil, fmt.Errorf("layer %d: %w", i, err)
		}
		zr, err := gzip.NewReader(bytes.NewReader(gz))
		if err != nil {
			return nil, fmt.Errorf("layer %d: %w", i, err)
		}
		raw, err := io.ReadAll(zr)
		if err != nil {
			return nil, fmt.Errorf("layer %d: %w", i, err)
		}
		if d := newBlob(raw).digest; d != a.Config.RootFS.DiffIDs[i] {
			return nil, fmt.Errorf("layer %d: diff ID %s, config says %s", i, d, a.Config.RootFS.DiffIDs[i])
		}
		entries, err := readLayer(raw)
		if err != nil {
			return nil, fmt.Errorf("layer %d: %w", i, err)
		}
		a.Layers = append(a.Layers, entries)
	}
	return a, nil
}

// ReadArchiveFile reads the archive at path.
func ReadArchiveFile(path string) (*Archive, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	a, err := ReadArchive(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return a, nil
}

func readLayer(raw []byte) ([]Entry, error) {
	var out []Entry
	tr := tar.NewReader(bytes.NewReader(raw))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		e := Entry{Path: strings.TrimSuffix(hdr.Name, "/"), Mode: FileMode(hdr.Mode), UID: hdr.Uid, GID: hdr.Gid}
		switch hdr.Typeflag {
		case tar.TypeDir:
			e.Type = Dir
		case tar.TypeReg:
			e.Type = File
			if e.Data, err = io.ReadAll(tr); err != nil {
				return nil, fmt.Errorf("%s: %w", hdr.Name, err)
			}
		case tar.TypeSymlink:
			e.Type, e.Linkname = Symlink, hdr.Linkname
		default:
			return nil, fmt.Errorf("%s: entry type %q not supported", hdr.Name, hdr.Typeflag)
		}
		out = append(out, e)
	}
}

// Unpack writes the image's layers, bottom first, into dir, as a container runtime would lay
// out its root file system. No whiteouts: Write makes none.
func (a *Archive) Unpack(dir string) error {
	for _, layer := range a.Layers {
		if err := WriteEntries(dir, layer); err != nil {
			return err
		}
	}
	return nil
}

// WriteEntries creates entries (parents before children) under dir, with their modes and, where
// permitted, owners; an existing file or link is replaced.
func WriteEntries(dir string, entries []Entry) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, e := range entries {
		p, err := CleanPath(e.Path)
		if err != nil {
			return err
		}
		target := filepath.Join(dir, filepath.FromSlash(p))
		switch e.Type {
		case Dir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case File:
			_ = os.Remove(target)
			if err := os.WriteFile(target, e.Data, 0o600); err != nil {
				return err
			}
		case Symlink:
			_ = os.Remove(target)
			if err := os.Symlink(e.Linkname, target); err != nil {
				return err
			}
			continue
		}
		// Owner first: chown clears the set-user-ID and set-group-ID bits.
		if err := os.Lchown(target, e.UID, e.GID); err != nil && !errors.Is(err, os.ErrPermission) {
			return err
		}
		if err := os.Chmod(target, e.Mode); err != nil {
			return err
		}
	}
	return nil
}
