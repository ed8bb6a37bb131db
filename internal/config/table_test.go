package config

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
	"k8s.io/kube-proxy/config/v1alpha1"
	"sigs.k8s.io/yaml"
)

// Every flag AddFlags registers is one entry of the table, and every entry's flag is
// registered, with help; every entry kipvs does not act on says why.
func TestTableFlagsAreRegistered(t *testing.T) {
	fs := pflag.NewFlagSet("kipvs", pflag.ContinueOnError)
	AddFlags(fs)
	byFlag := map[string]int{}
	for _, e := range table() {
		if e.flag == "" {
			continue
		}
		byFlag[e.flag]++
		fl := fs.Lookup(e.flag)
		switch {
		case fl == nil:
			t.Errorf("table entry --%s is not registered", e.flag)
		case fl.Usage != e.help || e.help == "":
			t.Errorf("--%s: help %q, the table says %q", e.flag, fl.Usage, e.help)
		}
	}
	fs.VisitAll(func(fl *pflag.Flag) {
		if byFlag[fl.Name] != 1 {
			t.Errorf("flag --%s has %d table entries, want 1", fl.Name, byFlag[fl.Name])
		}
	})
	for _, e := range table() {
		if (e.kind == kindIgnored || e.kind == kindObsolete) && e.reason == "" {
			t.Errorf("%s: kipvs does not act on it, but the table does not say why", e.setting())
		}
		if e.kind == kindIgnored && e.read != nil {
			t.Errorf("%s: an ignored setting is read into the Config", e.setting())
		}
	}
}

// kubeProxyFields returns the JSON path of every field of KubeProxyConfiguration, and
// whether it is a leaf (a value, list or map rather than an object).
func kubeProxyFields() map[string]bool {
	out := map[string]bool{}
	var walk func(prefix string, t reflect.Type)
	walk = func(prefix string, t reflect.Type) {
		for _, f := range structFields(t) {
			p := joinPath(prefix, f.name)
			ft := t.FieldByIndex(f.index).Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			leaf := ft.Kind() != reflect.Struct || reflect.PointerTo(ft).Implements(reflect.TypeFor[json.Unmarshaler]())
			out[p] = leaf
			if !leaf {
				walk(p, ft)
			}
		}
	}
	walk("", reflect.TypeFor[v1alpha1.KubeProxyConfiguration]())
	return out
}

// Every field of a KubeProxyConfiguration (walked with reflect) is in the table, itself or
// through a parent (winkernel), and read by exactly one entry unless kipvs ignores it; no
// entry names a field the type does not have, except the obsolete ones.
func TestTableCoversKubeProxyConfiguration(t *testing.T) {
	paths := kubeProxyFields()
	readers := map[string]int{}
	covered := map[string]bool{}
	for _, e := range table() {
		if e.field == "" {
			continue
		}
		_, known := paths[e.field]
		switch {
		case e.kind == kindObsolete && known:
			t.Errorf("%s is said to be obsolete but KubeProxyConfiguration has it", e.field)
		case e.kind != kindObsolete && !known:
			t.Errorf("table entry %s names no field of KubeProxyConfiguration", e.setting())
		}
		covered[e.field] = true
		if e.read != nil || e.kind == kindIgnored || e.kind == kindTypeMeta {
			readers[e.field]++
		}
	}
	for p, leaf := range paths {
		if !leaf {
			continue
		}
		var owner string
		for q := p; q != ""; q = parentPath(q) {
			if covered[q] {
				owner = q
				break
			}
		}
		switch {
		case owner == "":
			t.Errorf("field %s of KubeProxyConfiguration is not in the settings table", p)
		case readers[owner] != 1:
			t.Errorf("field %s is read by %d table entries, want 1", owner, readers[owner])
		}
	}
}

func parentPath(p string) string {
	i := strings.LastIndex(p, ".")
	if i < 0 {
		return ""
	}
	return p[:i]
}

// configFields maps the address of every field of c (nested sections included) to its
// name ("IPVS.SyncPeriod").
func configFields(c *Config) map[uintptr]string {
	out := map[uintptr]string{}
	var walk func(prefix string, v reflect.Value)
	walk = func(prefix string, v reflect.Value) {
		for i := range v.NumField() {
			f, name := v.Field(i), prefix+v.Type().Field(i).Name
			if f.Kind() == reflect.Struct && f.Type().PkgPath() == reflect.TypeFor[Config]().PkgPath() {
				walk(name+".", f)
				continue
			}
			out[f.Addr().Pointer()] = name
		}
	}
	walk("", reflect.ValueOf(c).Elem())
	return out
}

// changedFields names the fields of got that differ from base.
func changedFields(base, got Config) []string {
	var out []string
	bv, gv := reflect.ValueOf(&base).Elem(), reflect.ValueOf(&got).Elem()
	for _, name := range configFields(&base) {
		if !cmp.Equal(fieldByPath(bv, name).Interface(), fieldByPath(gv, name).Interface(), cmpConfig()...) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

func fieldByPath(v reflect.Value, path string) reflect.Value {
	for _, p := range strings.Split(path, ".") {
		v = v.FieldByName(p)
	}
	return v
}

// targetNames names the Config fields e says it sets.
func targetNames(t *testing.T, e entry) []string {
	t.Helper()
	if e.target == nil {
		return nil
	}
	var c Config
	names := configFields(&c)
	var out []string
	for _, p := range e.target(&c) {
		n, ok := names[reflect.ValueOf(p).Pointer()]
		if !ok {
			t.Fatalf("%s: target %T is not a field of Config", e.setting(), p)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// renderedFields flattens c's rendered YAML into its leaf paths and values.
func renderedFields(t *testing.T, c Config) map[string]string {
	t.Helper()
	b, err := c.RenderYAML()
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := yaml.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	var walk func(p string, v any)
	walk = func(p string, v any) {
		if m, ok := v.(map[string]any); ok && len(m) > 0 {
			for k, x := range m {
				walk(joinPath(p, k), x)
			}
			return
		}
		out[p] = fmt.Sprint(v)
	}
	walk("", v)
	return out
}

// renderedChanges names the rendered fields that differ between a and b.
func renderedChanges(t *testing.T, a, b Config) []string {
	t.Helper()
	ra, rb := renderedFields(t, a), renderedFields(t, b)
	var out []string
	for _, p := range slices.Sorted(maps.Keys(ra)) {
		if rb[p] != ra[p] {
			out = append(out, p)
		}
	}
	for p := range rb {
		if _, ok := ra[p]; !ok {
			out = append(out, p)
		}
	}
	return out
}

// checkRendered checks that only e's field renders differently, and that it does when the
// Config changed.
func checkRendered(t *testing.T, e entry, base, got Config, changed []string) {
	t.Helper()
	diff := renderedChanges(t, base, got)
	for _, p := range diff {
		if e.field == "" || p != e.field && !strings.HasPrefix(p, e.field+".") {
			t.Errorf("%s changes the rendered field %s", e.setting(), p)
		}
	}
	if e.field != "" && e.kind == kindSetting && len(changed) > 0 && len(diff) == 0 {
		t.Errorf("%s changes %v but not the rendered %s", e.setting(), changed, e.field)
	}
}

// checkChanged checks that the Config fields a sample changed are among those e names
// (--nodeport-addresses names two: the CIDRs and "primary"), and that it changed one when
// kipvs acts on the setting.
func checkChanged(t *testing.T, e entry, changed []string, sameAsDefault bool) {
	t.Helper()
	want := targetNames(t, e)
	for _, c := range changed {
		if !slices.Contains(want, c) {
			t.Errorf("changes %s; the entry sets only %v", c, want)
		}
	}
	if len(changed) == 0 && len(want) > 0 && !sameAsDefault {
		t.Errorf("changes nothing; the entry sets %v", want)
	}
}

// sameAsDefault are the samples that are also what kipvs does by default: ipvs, its
// only mode.
var sameAsDefault = map[string]bool{"proxy-mode": true, "mode": true}

// Each flag set to its sample value changes exactly the Config fields its entry names, and
// renders to exactly its file field; a flag kipvs ignores changes nothing and gets a notice.
func TestTableFlagSamples(t *testing.T) {
	for _, e := range table() {
		if e.flag == "" {
			continue
		}
		if e.sample == "" {
			if e.kind != kindInvocation {
				t.Errorf("--%s has no sample value", e.flag)
			}
			continue
		}
		t.Run(e.flag, func(t *testing.T) {
			log, logs := observed()
			got, err := loadArgs(t, log, dashed(e.flag)+"="+e.sample)
			if err != nil {
				t.Fatal(err)
			}
			changed := changedFields(Defaults(), got)
			checkChanged(t, e, changed, sameAsDefault[e.flag])
			checkRendered(t, e, Defaults(), got, changed)
			if n := e.flagNotice(); n != "" && !slices.Contains(noticeFields(logs), "--"+e.flag) {
				t.Errorf("no notice, want %q", n)
			}
			roundTrip(t, got)
		})
	}
}

// Each file field set to its sample value changes exactly the Config fields its reading
// entry names, and renders back to that field; a field kipvs ignores changes nothing and
// gets a notice.
func TestTableFileSamples(t *testing.T) {
	const head = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
	base, err := Parse([]byte(head+"mode: ipvs\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range Settings() {
		if s.Field == "" || !s.ReadsField || s.Kind == "type" {
			continue
		}
		e := entryOf(t, s)
		t.Run(s.Field, func(t *testing.T) {
			if s.FileSample == "" {
				t.Fatal("no sample value")
			}
			doc := head + "mode: ipvs\n" + s.FileSnippet()
			if s.Field == "mode" {
				doc = head + s.FileSnippet()
			}
			log, logs := observed()
			got, err := Parse([]byte(doc), log)
			if err != nil {
				t.Fatalf("%v\n%s", err, doc)
			}
			changed := changedFields(base, got)
			checkChanged(t, e, changed, sameAsDefault[s.Field])
			checkRendered(t, e, base, got, changed)
			if e.reason != "" && !slices.Contains(noticeFields(logs), s.Field) {
				t.Errorf("no notice, want %q", e.reason)
			}
			roundTrip(t, got)
		})
	}
}

// entryOf is the table entry Settings made s from.
func entryOf(t *testing.T, s Setting) entry {
	t.Helper()
	for _, e := range table() {
		if e.field == s.Field && e.flag == s.Flag {
			return e
		}
	}
	t.Fatalf("no entry for %+v", s)
	return entry{}
}

// roundTrip checks that c, rendered and parsed back, is c (less what a file cannot hold).
func roundTrip(t *testing.T, c Config) {
	t.Helper()
	b, err := c.RenderYAML()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(b, nil)
	if err != nil {
		t.Fatalf("the rendered configuration does not parse: %v\n%s", err, b)
	}
	want := fileOnly(c)
	// A disabled server is rendered as "", which kube-proxy reads as its default.
	def := FileDefaults()
	if !want.HealthzBindAddress.IsValid() {
		want.HealthzBindAddress = def.HealthzBindAddress
	}
	if !want.MetricsBindAddress.IsValid() {
		want.MetricsBindAddress = def.MetricsBindAddress
	}
	if diff := cmp.Diff(want, back, cmpConfig()...); diff != "" {
		t.Errorf("render and parse (-rendered +parsed):\n%s", diff)
	}
}
