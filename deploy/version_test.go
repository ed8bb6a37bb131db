package deploy_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// semverTag is the form VERSION holds: vMAJOR.MINOR.PATCH, with an optional pre-release.
var semverTag = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`)

// TestImageTagIsVersion checks that the repository's VERSION file (what make stamps into the
// binary and names make release's artifacts by) is the image tag deploy/ installs: the
// kustomize images: newTag of base/ (which deploy/ and kube-proxy-dropin/ build on) and the
// DaemonSet's own image, so a release never installs another release's image; and that
// CHANGELOG.md has a section for it.
func TestImageTagIsVersion(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	version := strings.TrimSpace(string(raw))
	if !semverTag.MatchString(version) || string(raw) != version+"\n" {
		t.Fatalf("VERSION = %q, want one line vX.Y.Z[-pre]", raw)
	}

	var k kustomization
	decodeStrict(t, filepath.Join("base", "kustomization.yaml"), &k)
	found := false
	for _, img := range k.Images {
		if img.Name != "ghcr.io/kipvs/kipvs" {
			continue
		}
		found = true
		if img.NewName != "" || img.Digest != "" {
			t.Errorf("base/kustomization.yaml images: %s has newName %q digest %q; the release manifests name the image by tag only", img.Name, img.NewName, img.Digest)
		}
		if img.NewTag != version {
			t.Errorf("base/kustomization.yaml images: ghcr.io/kipvs/kipvs newTag = %q, VERSION = %q", img.NewTag, version)
		}
	}
	if !found {
		t.Errorf("base/kustomization.yaml has no images: entry for ghcr.io/kipvs/kipvs (newTag: %s)", version)
	}

	b := loadBase(t)
	if got, want := b.ds.Spec.Template.Spec.Containers[0].Image, "ghcr.io/kipvs/kipvs:"+version; got != want {
		t.Errorf("base/daemonset.yaml image = %q, want %q (VERSION)", got, want)
	}

	changelog, err := os.ReadFile(filepath.Join("..", "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	section := "## [" + strings.TrimPrefix(version, "v") + "] - "
	if !strings.Contains(string(changelog), "\n"+section) {
		t.Errorf("CHANGELOG.md has no %q section for VERSION %s", section, version)
	}
}
