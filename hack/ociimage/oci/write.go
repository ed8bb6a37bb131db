package oci

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"sort"
	"time"
)

// Media types and annotations of the OCI image spec and containerd.
const (
	MediaTypeIndex    = "application/vnd.oci.image.index.v1+json"
	MediaTypeManifest = "application/vnd.oci.image.manifest.v1+json"
	MediaTypeConfig   = "application/vnd.oci.image.config.v1+json"
	MediaTypeLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"
	// AnnotationRefName names an index entry (skopeo's oci-archive:FILE:NAME, podman load).
	AnnotationRefName = "org.opencontainers.image.ref.name"
	// AnnotationImageName is the name containerd's importer (ctr images import) gives the entry.
	AnnotationImageName = "io.containerd.image.name"
)

// Config is what the image runs: the runtime part of the OCI image config.
type Config struct {
	User       string            `json:"User,omitempty"`
	Env        []string          `json:"Env,omitempty"`
	Entrypoint []string          `json:"Entrypoint,omitempty"`
	Cmd        []string          `json:"Cmd,omitempty"`
	WorkingDir string            `json:"WorkingDir,omitempty"`
	Labels     map[string]string `json:"Labels,omitempty"`
	StopSignal string            `json:"StopSignal,omitempty"`
}

// Image is what Write writes: layers (bottom first), the config, and the one time stamped on
// every file and on the image itself.
type Image struct {
	Layers  []*Tree
	Config  Config
	Created time.Time
	OS      string // "linux" when empty
	Arch    string // "amd64" when empty
	// History names each layer's origin (created_by), one per layer; optional.
	History []string
}

// Descriptor points at a blob.
type Descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    *Platform         `json:"platform,omitempty"`
}

// Platform is an index entry's platform.
type Platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

// Manifest is an OCI image manifest.
type Manifest struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Config        Descriptor   `json:"config"`
	Layers        []Descriptor `json:"layers"`
}

// Index is an OCI image index (index.json).
type Index struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Manifests     []Descriptor `json:"manifests"`
}

// ImageConfig is the OCI image config blob.
type ImageConfig struct {
	Created      string    `json:"created"`
	Architecture string    `json:"architecture"`
	OS           string    `json:"os"`
	Config       Config    `json:"config"`
	RootFS       RootFS    `json:"rootfs"`
	History      []History `json:"history,omitempty"`
}

// RootFS lists the layers' uncompressed digests.
type RootFS struct {
	Type    string   `json:"type"`
	DiffIDs []string `json:"diff_ids"`
}

// History is one layer's history entry.
type History struct {
	Created   string `json:"created"`
	CreatedBy string `json:"created_by,omitempty"`
}

// dockerManifest is one entry of the docker-archive manifest.json, so `docker load` of engines
// that predate OCI archives takes the file too.
type dockerManifest struct {
	Config   string
	RepoTags []string
	Layers   []string
}

type blob struct {
	digest string
	data   []byte
}

func newBlob(data []byte) blob {
	sum := sha256.Sum256(data)
	return blob{digest: "sha256:" + hex.EncodeToString(sum[:]), data: data}
}

// Write writes img as an OCI image-layout archive to w, with one index entry per name in names
// (each carrying both org.opencontainers.image.ref.name and io.containerd.image.name), and
// returns the manifest's digest ("sha256:...").
func Write(w io.Writer, img Image, names []string) (string, error) {
	im, err := buildImage(img)
	if err != nil {
		return "", err
	}
	idx := Index{SchemaVersion: 2, MediaType: MediaTypeIndex, Manifests: namedEntries(im.manifest, names)}
	idxJSON, err := json.Marshal(idx)
	if err != nil {
		return "", fmt.Errorf("index: %w", err)
	}
	dm := dockerManifest{Config: blobPath(im.config.Digest), RepoTags: names}
	for _, l := range im.layers {
		dm.Layers = append(dm.Layers, blobPath(l.Digest))
	}
	dmJSON, err := json.Marshal([]dockerManifest{dm})
	if err != nil {
		return "", fmt.Errorf("manifest.json: %w", err)
	}
	if err := writeLayout(w, img.Created, im.blobs, idxJSON, dmJSON); err != nil {
		return "", err
	}
	return im.manifest.Digest, nil
}

// WriteIndex writes imgs, one per platform, as a multi-platform OCI image-layout archive to
// w: an image index blob listing each image's manifest with its platform, which index.json
// names once per name in names (as Write names a manifest). It returns the image index's
// digest, the one a registry serves for the names and a signature signs. The archive has no
// docker manifest.json: docker load takes one platform only.
func WriteIndex(w io.Writer, imgs []Image, names []string, created time.Time) (string, error) {
	if len(imgs) == 0 {
		return "", fmt.Errorf("index has no images")
	}
	nested := Index{SchemaVersion: 2, MediaType: MediaTypeIndex, Manifests: []Descriptor{}}
	var blobs []blob
	seen := map[Platform]bool{}
	for _, img := range imgs {
		im, err := buildImage(img)
		if err != nil {
			return "", err
		}
		if seen[*im.manifest.Platform] {
			return "", fmt.Errorf("index: two images for %s/%s", im.manifest.Platform.OS, im.manifest.Platform.Architecture)
		}
		seen[*im.manifest.Platform] = true
		nested.Manifests = append(nested.Manifests, im.manifest)
		blobs = append(blobs, im.blobs...)
	}
	nestedJSON, err := json.Marshal(nested)
	if err != nil {
		return "", fmt.Errorf("image index: %w", err)
	}
	nb := newBlob(nestedJSON)
	blobs = append(blobs, nb)
	desc := Descriptor{MediaType: MediaTypeIndex, Digest: nb.digest, Size: int64(len(nestedJSON))}
	idxJSON, err := json.Marshal(Index{SchemaVersion: 2, MediaType: MediaTypeIndex, Manifests: namedEntries(desc, names)})
	if err != nil {
		return "", fmt.Errorf("index: %w", err)
	}
	if err := writeLayout(w, created, blobs, idxJSON, nil); err != nil {
		return "", err
	}
	return nb.digest, nil
}

// builtImage is one image's blobs (layers, config, manifest) and the descriptors naming them.
type builtImage struct {
	blobs    []blob
	layers   []Descriptor
	config   Descriptor
	manifest Descriptor // with the image's platform
}

func buildImage(img Image) (builtImage, error) {
	var out builtImage
	if len(img.Layers) == 0 {
		return out, fmt.Errorf("image has no layers")
	}
	if img.History != nil && len(img.History) != len(img.Layers) {
		return out, fmt.Errorf("image has %d layers but %d history entries", len(img.Layers), len(img.History))
	}
	os, arch := img.OS, img.Arch
	if os == "" {
		os = "linux"
	}
	if arch == "" {
		arch = "amd64"
	}
	created := img.Created.UTC().Format(time.RFC3339)
	cfg := ImageConfig{Created: created, Architecture: arch, OS: os, Config: img.Config, RootFS: RootFS{Type: "layers"}}
	man := Manifest{SchemaVersion: 2, MediaType: MediaTypeManifest}
	for i, layer := range img.Layers {
		raw, err := LayerTar(layer, img.Created)
		if err != nil {
			return out, fmt.Errorf("layer %d: %w", i, err)
		}
		gz, err := compress(raw)
		if err != nil {
			return out, fmt.Errorf("layer %d: %w", i, err)
		}
		b := newBlob(gz)
		out.blobs = append(out.blobs, b)
		cfg.RootFS.DiffIDs = append(cfg.RootFS.DiffIDs, newBlob(raw).digest)
		man.Layers = append(man.Layers, Descriptor{MediaType: MediaTypeLayer, Digest: b.digest, Size: int64(len(gz))})
		h := History{Created: created}
		if img.History != nil {
			h.CreatedBy = img.History[i]
		}
		cfg.History = append(cfg.History, h)
	}
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return out, fmt.Errorf("image config: %w", err)
	}
	cfgBlob := newBlob(cfgJSON)
	out.blobs = append(out.blobs, cfgBlob)
	man.Config = Descriptor{MediaType: MediaTypeConfig, Digest: cfgBlob.digest, Size: int64(len(cfgJSON))}
	manJSON, err := json.Marshal(man)
	if err != nil {
		return out, fmt.Errorf("manifest: %w", err)
	}
	manBlob := newBlob(manJSON)
	out.blobs = append(out.blobs, manBlob)
	out.layers, out.config = man.Layers, man.Config
	out.manifest = Descriptor{MediaType: MediaTypeManifest, Digest: manBlob.digest, Size: int64(len(manJSON)),
		Platform: &Platform{Architecture: arch, OS: os}}
	return out, nil
}

// namedEntries is index.json's entries for desc: one per name, or one unnamed.
func namedEntries(desc Descriptor, names []string) []Descriptor {
	out := []Descriptor{}
	for _, n := range names {
		e := desc
		e.Annotations = map[string]string{AnnotationRefName: n, AnnotationImageName: n}
		out = append(out, e)
	}
	if len(names) == 0 {
		out = append(out, desc)
	}
	return out
}

// writeLayout writes the image layout: the blobs (sorted by digest, each once), oci-layout,
// index.json and, when given, the docker manifest.json; every member stamped with created.
func writeLayout(w io.Writer, created time.Time, blobs []blob, idxJSON, dmJSON []byte) error {
	tw := tar.NewWriter(w)
	put := func(name string, data []byte) error {
		hdr := &tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(data)), ModTime: created}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
		if _, err := tw.Write(data); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
		return nil
	}
	for _, d := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o755, ModTime: created}); err != nil {
			return fmt.Errorf("write %s: %w", d, err)
		}
	}
	blobs = slices.Clone(blobs)
	sort.Slice(blobs, func(i, j int) bool { return blobs[i].digest < blobs[j].digest })
	seen := map[string]bool{}
	for _, b := range blobs {
		if seen[b.digest] {
			continue
		}
		seen[b.digest] = true
		if err := put(blobPath(b.digest), b.data); err != nil {
			return err
		}
	}
	files := []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", idxJSON},
	}
	if dmJSON != nil {
		files = append(files, struct {
			name string
			data []byte
		}{"manifest.json", dmJSON})
	}
	for _, f := range files {
		if err := put(f.name, f.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("close archive: %w", err)
	}
	return nil
}

func blobPath(digest string) string {
	return "blobs/sha256/" + digest[len("sha256:"):]
}

func compress(raw []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(raw); err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	return buf.Bytes(), nil
}

// LayerTar returns t as an uncompressed layer tar: entries sorted by path, every time set to
// mtime, no user or group names.
func LayerTar(t *Tree, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range t.Entries() {
		hdr := &tar.Header{Name: e.Path, Mode: tarMode(e.Mode), Uid: e.UID, Gid: e.GID, ModTime: mtime}
		switch e.Type {
		case Dir:
			hdr.Typeflag, hdr.Name = tar.TypeDir, e.Path+"/"
		case File:
			hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(e.Data))
		case Symlink:
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, e.Linkname
		default:
			return nil, fmt.Errorf("%s: unknown entry type %d", e.Path, e.Type)
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("%s: %w", e.Path, err)
		}
		if e.Type == File {
			if _, err := tw.Write(e.Data); err != nil {
				return nil, fmt.Errorf("%s: %w", e.Path, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func tarMode(m fs.FileMode) int64 {
	mode := int64(m.Perm())
	if m&fs.ModeSetuid != 0 {
		mode |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		mode |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		mode |= 0o1000
	}
	return mode
}

// FileMode converts a tar header mode to an fs.FileMode's permission and special bits.
func FileMode(mode int64) fs.FileMode {
	m := fs.FileMode(mode & 0o777)
	if mode&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if mode&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if mode&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m
}
