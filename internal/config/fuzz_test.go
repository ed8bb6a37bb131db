package config

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse feeds arbitrary bytes to Parse, the reader of kube-proxy's configuration file,
// and checks that
//
//   - it never panics, and gives the same answer twice (no state leaks between calls);
//   - a file it accepts renders (RenderYAML, what --write-config-to writes), and the
//     rendering is accepted again and renders to the same bytes: what kipvs reports as its
//     configuration is a file it would run with, unchanged.
//
// The seeds are the files of testdata/ (good, bad and odd configurations).
func FuzzParse(f *testing.F) {
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil {
		f.Fatal(err)
	}
	json, _ := filepath.Glob("testdata/*.json")
	for _, p := range append(files, json...) {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: ipvs\nclusterCIDR: 010.0.0.0/8\n"))
	f.Add([]byte("{\"apiVersion\":\"kubeproxy.config.k8s.io/v1alpha1\",\"kind\":\"KubeProxyConfiguration\",\"ipvs\":{\"scheduler\":\"\\u0000\"}}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, nil)
		c2, err2 := Parse(data, nil)
		if (err == nil) != (err2 == nil) || (err != nil && err.Error() != err2.Error()) {
			t.Fatalf("two parses of the same bytes disagree: %v / %v", err, err2)
		}
		if err != nil {
			return
		}
		out, err := c.RenderYAML()
		if err != nil {
			t.Fatalf("an accepted file does not render: %v", err)
		}
		if out2, _ := c2.RenderYAML(); !bytes.Equal(out, out2) {
			t.Fatalf("two parses of the same bytes render differently:\n%s\n---\n%s", out, out2)
		}
		back, err := Parse(out, nil)
		if err != nil {
			t.Fatalf("the rendering of an accepted file is refused: %v\n%s", err, out)
		}
		again, err := back.RenderYAML()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, again) {
			t.Fatalf("rendering is not stable:\n%s\n--- rendered again:\n%s", out, again)
		}
	})
}
