package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"unicode"

	"go.uber.org/zap"
	yamlv3 "go.yaml.in/yaml/v3"
	"k8s.io/kube-proxy/config/v1alpha1"
	"sigs.k8s.io/yaml"
)

// notice is a setting kipvs accepts but does not act on.
type notice struct {
	field  string
	reason string
}

// Parse reads a KubeProxyConfiguration (YAML or JSON) and returns the configuration it
// describes: FileDefaults overlaid with the file's settings, validated. As in kube-proxy,
// unknown fields are ignored and of duplicate fields the last is used; each is logged at
// Warn level on log, and settings kipvs accepts but ignores at Info level (nil: not logged).
func Parse(data []byte, log *zap.Logger) (Config, error) {
	f, err := parseFile(data)
	if err != nil {
		return Config{}, err
	}
	errs := f.errs
	if verr := f.config.Validate(); verr != nil {
		errs = append(errs, verr)
	}
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	logWarnings(log, "", f.warnings)
	logNotices(log, "", f.notices)
	return f.config, nil
}

// parsedFile is a decoded and converted file.
type parsedFile struct {
	config Config
	// notices are the settings kipvs accepts but does not act on.
	notices []notice
	// warnings are the unknown and duplicate fields kube-proxy's lenient decoding lets through.
	warnings []fileWarning
	// errs are the values that do not parse, one per value.
	errs []error
}

// parseFile decodes and converts a file. A document kube-proxy cannot decode (bad syntax,
// wrong apiVersion or kind, wrong types) is a fatal error; values that do not parse are
// returned in errs, one per value, alongside the rest of the configuration so that
// validation can report its own findings too. The result is not validated.
func parseFile(data []byte) (parsedFile, error) {
	kp, present, skipped, warnings, err := decodeFile(data)
	if err != nil {
		return parsedFile{}, err
	}
	c, notices, errs := fromKubeProxyConfiguration(kp, present)
	return parsedFile{config: c, notices: append(skipped, notices...), warnings: warnings, errs: errs}, nil
}

// decodeFile parses data into a KubeProxyConfiguration the way kube-proxy v1.34 does: a
// document whose first non-blank character is "{" is JSON, anything else YAML; it must be
// a kubeproxy.config.k8s.io/v1alpha1 KubeProxyConfiguration whose values have the right
// types. kube-proxy first decodes strictly and, when that fails only because of unknown or
// duplicate fields, decodes again leniently, ignoring unknown fields and keeping the last
// of duplicate ones; decodeFile returns the lenient result and those fields as warnings,
// with the paths the file set and the obsolete fields it skipped.
func decodeFile(data []byte) (*v1alpha1.KubeProxyConfiguration, []string, []notice, []fileWarning, error) {
	trimmed := bytes.TrimLeftFunc(data, unicode.IsSpace)
	if len(bytes.TrimSpace(trimmed)) == 0 {
		return nil, nil, nil, nil, errors.New("the file is empty; expected a KubeProxyConfiguration")
	}
	var js []byte
	var warnings []fileWarning
	var lines map[string]int
	if trimmed[0] == '{' {
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			return nil, nil, nil, nil, fmt.Errorf("not valid JSON (a file that starts with \"{\" is read as JSON, as kube-proxy does): %w", err)
		}
		js = data
	} else {
		var err error
		js, err = yaml.YAMLToJSON(data)
		if err != nil {
			return nil, nil, nil, nil, fmt.Errorf("not valid YAML or JSON: %w", err)
		}
		var dups []fileWarning
		lines, dups = yamlKeys(data)
		if _, serr := yaml.YAMLToJSONStrict(data); serr != nil {
			// The YAML conversion kept the last of duplicate keys, as kube-proxy's does.
			warnings = dups
			if len(warnings) == 0 {
				warnings = []fileWarning{{duplicate: true, field: serr.Error()}}
			}
		}
	}
	members, err := objectMembers(js)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("expected a KubeProxyConfiguration object: %w", err)
	}
	if err := checkTypeMeta(members); err != nil {
		return nil, nil, nil, nil, err
	}
	kp := &v1alpha1.KubeProxyConfiguration{}
	d := strictDecoder{obsolete: obsoleteFields()}
	d.decode("", js, reflect.ValueOf(kp).Elem())
	if len(d.errs) > 0 {
		return nil, nil, nil, nil, errors.Join(d.errs...)
	}
	for _, w := range d.warnings {
		if w.line == 0 {
			w.line = lines[w.field]
		}
		warnings = append(warnings, w)
	}
	// In document order (the YAML conversion sorted the keys).
	slices.SortStableFunc(warnings, func(a, b fileWarning) int { return a.line - b.line })
	return kp, d.present, d.skipped, warnings, nil
}

// yamlKeys returns the line of every key path of a YAML document (the first occurrence's)
// and the keys it repeats within one mapping, with their paths and lines.
func yamlKeys(data []byte) (map[string]int, []fileWarning) {
	var doc yamlv3.Node
	if yamlv3.Unmarshal(data, &doc) != nil {
		return nil, nil
	}
	lines := map[string]int{}
	var out []fileWarning
	var walk func(path string, n *yamlv3.Node)
	walk = func(path string, n *yamlv3.Node) {
		switch n.Kind {
		case yamlv3.DocumentNode:
			for _, c := range n.Content {
				walk(path, c)
			}
		case yamlv3.SequenceNode:
			for i, c := range n.Content {
				walk(fmt.Sprintf("%s[%d]", path, i), c)
			}
		case yamlv3.MappingNode:
			seen := map[string]bool{}
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				p := joinPath(path, k.Value)
				if seen[k.Value] {
					out = append(out, fileWarning{field: p, duplicate: true, line: k.Line})
				} else if _, ok := lines[p]; !ok {
					lines[p] = k.Line
				}
				seen[k.Value] = true
				walk(p, v)
			}
		}
	}
	walk("", &doc)
	return lines, out
}

// obsoleteFields maps the fields older kube-proxy releases had in v1alpha1 (see
// documentEntries) to the reason they are skipped.
func obsoleteFields() map[string]string {
	out := map[string]string{}
	for _, e := range table() {
		if e.kind == kindObsolete {
			out[e.field] = e.reason
		}
	}
	return out
}

// checkTypeMeta refuses a document that is not a kubeproxy.config.k8s.io/v1alpha1
// KubeProxyConfiguration before its fields are looked at.
func checkTypeMeta(members []member) error {
	want := map[string]string{"apiVersion": APIVersion, "kind": Kind}
	var errs []error
	for _, key := range []string{"apiVersion", "kind"} {
		var raw json.RawMessage
		for _, m := range members {
			if m.key == key {
				raw = m.raw
			}
		}
		var got string
		switch {
		case raw == nil:
			errs = append(errs, &FieldError{Field: key, Detail: fmt.Sprintf("missing; the file must say %s: %s", key, want[key])})
		case json.Unmarshal(raw, &got) != nil || got != want[key]:
			errs = append(errs, &FieldError{Field: key, Value: displayValue(raw),
				Detail: fmt.Sprintf("kipvs reads only apiVersion %s, kind %s", APIVersion, Kind)})
		}
	}
	return errors.Join(errs...)
}

// fromKubeProxyConfiguration converts a decoded file into a Config, filling what the file
// left unset the way kube-proxy's defaulting does (a zero value counts as unset, except for
// the pointer fields). It does not validate the result beyond parsing values.
func fromKubeProxyConfiguration(kp *v1alpha1.KubeProxyConfiguration, present []string) (Config, []notice, []error) {
	c := FileDefaults()
	r := &fileRun{kp: kp, c: &c}
	t := table()
	for _, e := range t {
		if e.read != nil {
			e.read(r, e.setting().fieldOnly())
		}
	}
	return c, append(r.notices, ignoredNotices(t, kp, present)...), r.errs
}

// parseNodePortAddresses parses nodePortAddresses: CIDRs, or the single word "primary".
func parseNodePortAddresses(s setting, items []string) ([]netip.Prefix, bool, []error) {
	for _, it := range items {
		if strings.TrimSpace(it) == nodePortPrimary {
			if len(items) != 1 {
				return nil, false, []error{s.invalid(strings.Join(items, ","), "%q cannot be combined with CIDRs", nodePortPrimary)}
			}
			return nil, true, nil
		}
	}
	ps, errs := parseCIDRs(s, items)
	return ps, false, errs
}

// logFormatFromKubeProxy maps kube-proxy's logging.format to kipvs's log format.
func logFormatFromKubeProxy(s setting, f string) (LogFormat, error) {
	switch f {
	case "", "text":
		return LogFormatText, nil
	case "json":
		return LogFormatJSON, nil
	}
	return LogFormatText, s.invalid(f, `must be "text" or "json"`)
}

// ignoredNotices lists the fields kipvs does not act on that the file sets to something
// other than kube-proxy's default (a field set to its default changes nothing, so is not
// worth a word).
func ignoredNotices(t []entry, kp *v1alpha1.KubeProxyConfiguration, present []string) []notice {
	def := defaultKubeProxyConfiguration()
	var out []notice
	for _, e := range t {
		if e.unused == nil || !slices.ContainsFunc(present, func(p string) bool {
			return p == e.field || strings.HasPrefix(p, e.field+".") || strings.HasPrefix(p, e.field+"[")
		}) {
			continue
		}
		got := e.unused(kp)
		if reflect.ValueOf(got).IsZero() || reflect.DeepEqual(got, e.unused(def)) {
			continue
		}
		out = append(out, notice{e.field, e.reason})
	}
	return out
}

func logWarnings(log *zap.Logger, file string, warnings []fileWarning) {
	if log == nil {
		return
	}
	for _, w := range warnings {
		fields := []zap.Field{zap.String("field", w.field)}
		if file != "" {
			fields = append(fields, zap.String("file", file))
		}
		if w.line > 0 {
			fields = append(fields, zap.Int("line", w.line))
		}
		if w.duplicate {
			log.Warn("duplicate field in the config file; the last one is used, as kube-proxy does", fields...)
			continue
		}
		if w.suggestion != "" {
			fields = append(fields, zap.String("did_you_mean", w.suggestion))
		}
		log.Warn("unknown field in the config file, ignored as kube-proxy ignores it", fields...)
	}
}

func logNotices(log *zap.Logger, file string, notices []notice) {
	if log == nil {
		return
	}
	for _, n := range notices {
		fields := []zap.Field{zap.String("field", n.field), zap.String("reason", n.reason)}
		if file != "" {
			fields = append(fields, zap.String("file", file))
		}
		log.Info("kube-proxy setting accepted but not used by kipvs", fields...)
	}
}
