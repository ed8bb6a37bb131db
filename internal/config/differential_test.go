package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/kube-proxy/config/v1alpha1"
)

// kubeProxyDecode decodes a configuration file the way kube-proxy v1.34's loadConfig does,
// with the same apimachinery serializers: strictly first and, when that fails with a
// strict-decoding error (unknown or duplicate fields), again leniently. It stops before
// kube-proxy's conversion to its internal type and defaulting, which never refuse a file.
func kubeProxyDecode(t *testing.T, data []byte) (kp *v1alpha1.KubeProxyConfiguration, lenient bool, err error) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	strict := serializer.NewCodecFactory(scheme, serializer.EnableStrict)
	obj, _, err := strict.UniversalDeserializer().Decode(data, nil, nil)
	if err != nil {
		if !runtime.IsStrictDecodingError(err) {
			return nil, false, err
		}
		lenientCodecs := serializer.NewCodecFactory(scheme, serializer.DisableStrict)
		obj, _, err = lenientCodecs.UniversalDeserializer().Decode(data, nil, nil)
		if err != nil {
			return nil, true, err
		}
		lenient = true
	}
	kp, ok := obj.(*v1alpha1.KubeProxyConfiguration)
	if !ok {
		t.Fatalf("decoded a %T", obj)
	}
	return kp, lenient, nil
}

// The config differential: every document is accepted or refused by kipvs exactly when
// kube-proxy v1.34's decoding accepts or refuses it, decodes to the same
// KubeProxyConfiguration (unknown fields ignored, the last of duplicate fields kept,
// duplicate JSON objects merged), and gets a warning or notice exactly when kube-proxy had
// to fall back to lenient decoding.
func TestDecodeMatchesKubeProxy(t *testing.T) {
	const head = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
	const jhead = `"apiVersion":"kubeproxy.config.k8s.io/v1alpha1","kind":"KubeProxyConfiguration"`
	docs := map[string]string{
		"unknown top-level field":          head + "mode: ipvs\nconntrackMax: 1000\n",
		"misspelt nested field":            head + "ipvs:\n  scheduller: wrr\n  syncPeriod: 1m\n",
		"field with the wrong case":        head + "ipvs:\n  SyncPeriod: 1m\n",
		"duplicate YAML scalar":            head + "mode: ipvs\nclusterCIDR: 10.0.0.0/16\nclusterCIDR: 10.1.0.0/16\n",
		"duplicate YAML section":           head + "ipvs:\n  scheduler: wrr\n  strictARP: true\nipvs:\n  syncPeriod: 1m\n",
		"duplicate YAML nested key":        head + "ipvs:\n  scheduler: wrr\n  scheduler: lc\n",
		"duplicate feature gate":           head + "featureGates:\n  A: true\n  A: false\n",
		"duplicate key in a list item":     head + "logging:\n  vmodule:\n  - filePattern: a\n    filePattern: b\n    verbosity: 2\n",
		"duplicate JSON scalar":            "{" + jhead + `,"mode":"ipvs","clusterCIDR":"10.0.0.0/16","clusterCIDR":"10.1.0.0/16"}`,
		"duplicate JSON section":           "{" + jhead + `,"ipvs":{"scheduler":"wrr","strictARP":true},"ipvs":{"syncPeriod":"1m"}}`,
		"duplicate JSON map":               "{" + jhead + `,"featureGates":{"A":true},"featureGates":{"B":false}}`,
		"duplicate JSON list":              "{" + jhead + `,"nodePortAddresses":["10.0.0.0/8"],"nodePortAddresses":["192.168.0.0/16"]}`,
		"unknown and duplicate JSON":       "{" + jhead + `,"mode":"ipvs","mode":"ipvs","bogus":{"x":1}}`,
		"JSON after blank lines":           "\n\n  {" + jhead + `,"mode":"ipvs"}`,
		"YAML flow mapping":                "{apiVersion: kubeproxy.config.k8s.io/v1alpha1, kind: KubeProxyConfiguration, mode: ipvs}",
		"JSON with trailing text":          "{" + jhead + "} x",
		"JSON in YAML clothing":            "# comment\n{" + jhead + `,"mode":"ipvs"}`,
		"wrong type":                       head + "ipvs:\n  strictARP: maybe\n",
		"wrong type next to unknown field": head + "bogus: 1\nipvs:\n  strictARP: maybe\n",
		"out of range":                     head + "iptables:\n  masqueradeBit: 99999999999\n",
		"bad duration":                     head + "configSyncPeriod: soon\n",
		"section of the wrong type":        head + "conntrack: 5\n",
		"wrong apiVersion":                 "apiVersion: kubeproxy.config.k8s.io/v1beta1\nkind: KubeProxyConfiguration\n",
		"wrong kind":                       "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeletConfiguration\n",
		"no apiVersion or kind":            "mode: ipvs\n",
		"empty":                            "",
		"comments only":                    "# nothing\n",
		"a list":                           "- a\n- b\n",
		"not YAML":                         "apiVersion: [unclosed\n",
		"second document ignored":          head + "mode: ipvs\n---\n" + head + "mode: iptables\n",
		"nulls":                            head + "ipvs: null\nconntrack:\n  maxPerCore: null\n",
		"JSON field with the wrong case":   "{" + jhead + `,"mode":"ipvs","Mode":"iptables"}`,
		"YAML duplicate fixes a bad value": head + "ipvs:\n  strictARP: maybe\nipvs:\n  strictARP: true\n",
		"JSON duplicate after a bad value": "{" + jhead + `,"ipvs":{"strictARP":"maybe"},"ipvs":{"strictARP":true}}`,
		"duplicate apiVersion, YAML":       "apiVersion: v1\n" + head,
		"duplicate apiVersion, JSON":       `{"apiVersion":"v1",` + jhead + "}",
		"YAML anchor and merge key":        head + "detectLocal: &d\n  bridgeInterface: cbr0\nipvs:\n  <<: {scheduler: wrr}\n  strictARP: true\n",
		"unknown field holding a list":     head + "bogus: [1, {a: b}]\n",
		"integer key":                      head + "1: x\n",
		"null document":                    "null\n",
	}
	files, err := filepath.Glob(filepath.Join("testdata", "*.*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if ext := filepath.Ext(f); ext != ".yaml" && ext != ".json" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs[f] = string(b)
	}
	for name, doc := range docs {
		t.Run(name, func(t *testing.T) {
			want, lenient, wantErr := kubeProxyDecode(t, []byte(doc))
			got, _, skipped, warnings, err := decodeFile([]byte(doc))
			switch {
			case wantErr != nil && err == nil:
				t.Fatalf("kipvs accepts what kube-proxy refuses (%v)", wantErr)
			case wantErr == nil && err != nil:
				t.Fatalf("kipvs refuses what kube-proxy accepts: %v", err)
			case err != nil:
				return
			}
			if !apiequality.Semantic.DeepEqual(want, got) {
				t.Errorf("decoded differently (-kube-proxy +kipvs):\n%s", cmp.Diff(want, got,
					cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 }), cmpopts.EquateEmpty()))
			}
			if said := len(warnings)+len(skipped) > 0; said != lenient {
				t.Errorf("kube-proxy fell back to lenient decoding: %t; kipvs warned: %v, notices %v", lenient, warnings, skipped)
			}
		})
	}
}
