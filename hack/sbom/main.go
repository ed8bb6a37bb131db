// Command sbom writes an SPDX 2.3 JSON document for one architecture of a kipvs release: the
// binary with the Go modules its build information lists (debug/buildinfo, what `go version
// -m` prints), and the Debian packages the image of that architecture took (hack/ociimage's
// --packages-out). The document is a function of its inputs: its time is SOURCE_DATE_EPOCH
// and its namespace is derived from the binary's digest.
package main

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "sbom:", err)
		os.Exit(1)
	}
}

// debPackage is one entry of ociimage's --packages-out.
type debPackage struct {
	Name, Version, Architecture, File, SHA256 string
}

type document struct {
	SPDXVersion       string         `json:"spdxVersion"`
	DataLicense       string         `json:"dataLicense"`
	SPDXID            string         `json:"SPDXID"`
	Name              string         `json:"name"`
	DocumentNamespace string         `json:"documentNamespace"`
	CreationInfo      creationInfo   `json:"creationInfo"`
	DocumentDescribes []string       `json:"documentDescribes"`
	Packages          []pkg          `json:"packages"`
	Relationships     []relationship `json:"relationships"`
}

type creationInfo struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type pkg struct {
	SPDXID           string        `json:"SPDXID"`
	Name             string        `json:"name"`
	VersionInfo      string        `json:"versionInfo,omitempty"`
	DownloadLocation string        `json:"downloadLocation"`
	FilesAnalyzed    bool          `json:"filesAnalyzed"`
	Supplier         string        `json:"supplier,omitempty"`
	Checksums        []checksum    `json:"checksums,omitempty"`
	ExternalRefs     []externalRef `json:"externalRefs,omitempty"`
	Comment          string        `json:"comment,omitempty"`
}

type checksum struct {
	Algorithm     string `json:"algorithm"`
	ChecksumValue string `json:"checksumValue"`
}

type externalRef struct {
	ReferenceCategory string `json:"referenceCategory"`
	ReferenceType     string `json:"referenceType"`
	ReferenceLocator  string `json:"referenceLocator"`
}

type relationship struct {
	SPDXElementID      string `json:"spdxElementId"`
	RelationshipType   string `json:"relationshipType"`
	RelatedSPDXElement string `json:"relatedSpdxElement"`
}

func run(args []string) error {
	fl := flag.NewFlagSet("sbom", flag.ContinueOnError)
	binary := fl.String("binary", "", "the kipvs binary")
	packages := fl.String("packages", "", "hack/ociimage --packages-out file (optional)")
	arch := fl.String("arch", "", "the architecture whose packages to take from --packages")
	name := fl.String("name", "", "the document's name (default: the binary's file name)")
	out := fl.String("out", "", "the SPDX JSON file to write")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if *binary == "" || *out == "" {
		return fmt.Errorf("--binary and --out are required")
	}
	var debs []debPackage
	if *packages != "" {
		raw, err := os.ReadFile(*packages)
		if err != nil {
			return err
		}
		var byArch map[string][]debPackage
		if err := json.Unmarshal(raw, &byArch); err != nil {
			return fmt.Errorf("%s: %w", *packages, err)
		}
		var ok bool
		if debs, ok = byArch[*arch]; !ok {
			return fmt.Errorf("%s lists no packages for --arch %q", *packages, *arch)
		}
	}
	created := time.Unix(0, 0).UTC()
	if v := os.Getenv("SOURCE_DATE_EPOCH"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("SOURCE_DATE_EPOCH=%q: %w", v, err)
		}
		created = time.Unix(n, 0).UTC()
	}
	if *name == "" {
		*name = filepath.Base(*binary)
	}
	doc, err := build(*binary, *name, debs, created)
	if err != nil {
		return err
	}
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(*out, append(data, '\n'), 0o644)
}

var unsafeID = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

func spdxID(kind, name, version string) string {
	return "SPDXRef-" + kind + "-" + unsafeID.ReplaceAllString(name+"-"+version, "-")
}

func build(binary, name string, debs []debPackage, created time.Time) (document, error) {
	data, err := os.ReadFile(binary)
	if err != nil {
		return document{}, err
	}
	info, err := buildinfo.ReadFile(binary)
	if err != nil {
		return document{}, fmt.Errorf("%s: no Go build information: %w", binary, err)
	}
	sum := sha256.Sum256(data)
	digest := hex.EncodeToString(sum[:])
	root := spdxID("Binary", name, "")
	doc := document{
		SPDXVersion: "SPDX-2.3", DataLicense: "CC0-1.0", SPDXID: "SPDXRef-DOCUMENT", Name: name,
		DocumentNamespace: "https://github.com/kipvs/kipvs/spdx/" + name + "-" + digest,
		CreationInfo:      creationInfo{Created: created.Format(time.RFC3339), Creators: []string{"Tool: kipvs-hack-sbom", "Organization: kipvs"}},
		DocumentDescribes: []string{root},
	}
	main := pkg{SPDXID: root, Name: name, VersionInfo: info.Main.Version, DownloadLocation: "NOASSERTION",
		Checksums: []checksum{{"SHA256", digest}}, Comment: "built with " + info.GoVersion + " from " + info.Main.Path}
	doc.Packages = append(doc.Packages, main)
	add := func(p pkg) {
		doc.Packages = append(doc.Packages, p)
		doc.Relationships = append(doc.Relationships, relationship{root, "CONTAINS", p.SPDXID})
	}
	add(pkg{SPDXID: spdxID("Go", "stdlib", info.GoVersion), Name: "stdlib", VersionInfo: info.GoVersion, DownloadLocation: "https://go.dev/dl/",
		ExternalRefs: []externalRef{{"PACKAGE-MANAGER", "purl", "pkg:golang/stdlib@" + info.GoVersion}}})
	for _, m := range info.Deps {
		if m.Replace != nil {
			m = m.Replace
		}
		p := pkg{SPDXID: spdxID("Go", m.Path, m.Version), Name: m.Path, VersionInfo: m.Version, DownloadLocation: "https://proxy.golang.org/" + m.Path + "/@v/" + m.Version + ".zip",
			ExternalRefs: []externalRef{{"PACKAGE-MANAGER", "purl", "pkg:golang/" + m.Path + "@" + m.Version}}}
		if m.Sum != "" {
			p.Comment = "go.sum " + m.Sum
		}
		add(p)
	}
	for _, d := range debs {
		add(pkg{SPDXID: spdxID("Deb", d.Name, d.Version+"-"+d.Architecture), Name: d.Name, VersionInfo: d.Version, Supplier: "Organization: Debian",
			DownloadLocation: "NOASSERTION", Checksums: []checksum{{"SHA256", d.SHA256}}, Comment: "in the image: " + d.File,
			ExternalRefs: []externalRef{{"PACKAGE-MANAGER", "purl", "pkg:deb/debian/" + d.Name + "@" + d.Version + "?arch=" + d.Architecture + "&distro=debian-12"}}})
	}
	doc.Relationships = append([]relationship{{"SPDXRef-DOCUMENT", "DESCRIBES", root}}, doc.Relationships...)
	return doc, nil
}
