package main

import (
	"github.com/kipvs/kipvs/internal/netfilter"

	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kipvs/kipvs/hack/ociimage/oci"
)

// TestBuildPause runs the tool's build command on the pause recipe and reads the archive back:
// one layer holding /pause as given, the upstream name, user and entrypoint, the time from
// SOURCE_DATE_EPOCH, and the printed digest in --digest-file. A second build gives the same
// bytes.
func TestBuildPause(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "pause-bin")
	if err := os.WriteFile(bin, []byte("#!pause"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	build := func(out string) []byte {
		t.Helper()
		if err := run([]string{"build", "pause", "--input", "pause=" + bin, "--out", out, "--digest-file", out + ".digest"}); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	first := build(filepath.Join(dir, "a.tar"))
	if second := build(filepath.Join(dir, "b.tar")); !slices.Equal(first, second) {
		t.Error("two builds from the same inputs differ")
	}
	a, err := oci.ReadArchiveFile(filepath.Join(dir, "a.tar"))
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := os.ReadFile(filepath.Join(dir, "a.tar.digest")); strings.TrimSpace(string(d)) != a.ManifestDigest {
		t.Errorf("--digest-file holds %q, the archive's manifest is %s", d, a.ManifestDigest)
	}
	if len(a.Index.Manifests) != 1 || a.Index.Manifests[0].Annotations[oci.AnnotationImageName] != "registry.k8s.io/pause:3.10.1" {
		t.Errorf("index: %+v", a.Index.Manifests)
	}
	want := oci.Config{Entrypoint: []string{"/pause"}, User: "65535:65535"}
	if diff := cmp.Diff(want, a.Config.Config); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
	if a.Config.Created != "2023-11-14T22:13:20Z" {
		t.Errorf("created %s, want SOURCE_DATE_EPOCH's 2023-11-14T22:13:20Z", a.Config.Created)
	}
	if len(a.Layers) != 1 || len(a.Layers[0]) != 1 {
		t.Fatalf("layers: %+v", a.Layers)
	}
	if e := a.Layers[0][0]; e.Path != "pause" || e.Type != oci.File || e.Mode != 0o755 || string(e.Data) != "#!pause" || e.UID != 0 {
		t.Errorf("layer entry: %+v", e)
	}
}

func TestBuildErrors(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "f")
	if err := os.WriteFile(bin, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "x.tar")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"build", "pause", "--out", out}, "input pause (/pause) not given: --input pause=FILE"},
		{[]string{"build", "pause", "--out", out, "--input", "pause=" + bin, "--input", "other=" + bin}, "--input other: recipe pause takes no such input"},
		{[]string{"build", "nothing", "--out", out}, `no recipe "nothing"`},
		{[]string{"build", "pause", "--input", "pause=" + bin}, "--out is required"},
		{[]string{"build", "pause", "--out", out, "--input", "pause=" + filepath.Join(dir, "missing")}, "input pause: open"},
	} {
		err := run(c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error with %q", c.args, err, c.want)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a failed build left %s (%v)", out, err)
	}
}

// TestContainerfileRunsTheRecipe: deploy/Containerfile builds the kipvs image from the same
// recipe (its packages installed, `ociimage rootfs kipvs` on them) and runs what it runs.
func TestContainerfileRunsTheRecipe(t *testing.T) {
	b, err := os.ReadFile("../../deploy/Containerfile")
	if err != nil {
		t.Fatal(err)
	}
	cf := string(b)
	r := kipvsRecipe()
	for _, want := range []string{
		"apt-get install -y --no-install-recommends " + strings.Join(r.Packages, " ") + " ",
		"RUN /ociimage rootfs kipvs --source-root / --out /out\n",
		"COPY kipvs /" + r.Inputs[0].Path + "\n",
		"ENV " + strings.Join(r.Config.Env, " ") + "\n",
		`ENTRYPOINT ["` + strings.Join(r.Config.Entrypoint, `", "`) + `"]` + "\n",
		`CMD ["` + strings.Join(r.Config.Cmd, `", "`) + `"]` + "\n",
	} {
		if !strings.Contains(cf, want) {
			t.Errorf("deploy/Containerfile lacks %q", want)
		}
	}
}

// TestRecipeNames: each recipe's default name is the one its consumer asks for (the e2e suite's
// test/utils/image/manifest.go, kubeadm's constants, deploy/base), and each input lands in the
// image where the config runs it.
func TestRecipeNames(t *testing.T) {
	want := map[string]string{
		"kipvs":   "ghcr.io/kipvs/kipvs:dev",
		"pause":   "registry.k8s.io/pause:3.10.1",
		"agnhost": "registry.k8s.io/e2e-test-images/agnhost:2.56",
		"coredns": "registry.k8s.io/coredns/coredns:v1.12.1",
		"echo":    "localhost/kipvs-e2e-echo:dev",
		// kubeadm v1.34.10's image for kube-proxy (its GetKubernetesImage).
		"kube-proxy": "registry.k8s.io/kube-proxy:v1.34.10",

		"jessie-dnsutils":        "registry.k8s.io/e2e-test-images/jessie-dnsutils:1.7",
		"busybox":                "registry.k8s.io/e2e-test-images/busybox:1.37.0-1",
		"regression-issue-74839": "registry.k8s.io/e2e-test-images/regression-issue-74839:1.2",
		"distroless-iptables":    "registry.k8s.io/build-image/distroless-iptables:v0.8.14",
	}
	got := map[string]string{}
	for n, r := range recipes() {
		got[n] = strings.Join(r.Names, " ")
		if len(r.Inputs) == 0 {
			// A Debian-only image (the suite's test images): the test's pod spec gives the command.
			if len(r.Packages) == 0 {
				t.Errorf("recipe %s has neither inputs nor packages", n)
			}
			continue
		}
		if ep := r.Config.Entrypoint; len(ep) == 0 || !slices.ContainsFunc(r.Inputs, func(in input) bool { return "/"+in.Path == ep[0] }) {
			t.Errorf("recipe %s runs %q, which is none of its inputs", n, ep)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("recipe names (-want +got):\n%s", diff)
	}
}

// TestAgnhostUsers: the users and groups upstream's agnhost image defines, which a
// SupplementalGroups test expects in the image.
func TestAgnhostUsers(t *testing.T) {
	files := map[string]string{}
	for _, f := range agnhostRecipe().Selection.Files {
		files[f.Path] = f.Data
	}
	for path, line := range map[string]string{
		"etc/passwd": "user-defined-in-image:x:1000:1000:",
		"etc/group":  "group-defined-in-image:x:50000:user-defined-in-image\n",
	} {
		if !strings.Contains(files[path], line) {
			t.Errorf("%s lacks %q:\n%s", path, line, files[path])
		}
	}
}

// TestKipvsImageHasEveryProgram: kipvs runs iptables-nft --version and ip6tables-nft -t nat
// -S POSTROUTING as well as the -save/-restore tools; an image without them ran IPv4 only and
// wrote MASQUERADE without --random-fully on the real node (seen in the conformance run's
// /metrics: no IPv6 family).
func TestKipvsImageHasEveryProgram(t *testing.T) {
	links := map[string]string{}
	for _, l := range recipes()["kipvs"].Selection.Links {
		links[l.Path] = l.Target
	}
	for _, m := range []netfilter.Mode{netfilter.ModeNFT, netfilter.ModeLegacy} {
		for _, p := range netfilter.Programs(m) {
			if got, want := links["usr/sbin/"+p], "xtables-"+string(m)+"-multi"; got != want {
				t.Errorf("kipvs image: /usr/sbin/%s -> %q, want %q", p, got, want)
			}
		}
	}
}
