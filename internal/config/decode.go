package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// strictDecoder fills a Go value from JSON the way kube-proxy's lenient fallback decoder
// (encoding/json semantics, field names matched case-sensitively) would, and reports every
// problem with its path: values of the wrong type are errors naming the field path
// ("ipvs.syncPeriod") and the value as written; unknown fields, which kube-proxy's strict
// decoder refuses and its lenient fallback ignores, and duplicate fields, of which the
// fallback keeps the last (merging duplicate objects, as encoding/json does), are recorded
// as warnings. It also records which paths the document set.
type strictDecoder struct {
	// obsolete maps the paths of fields that older versions of the type had to the reason
	// they are skipped; such fields are recorded in skipped instead of warnings.
	obsolete map[string]string
	skipped  []notice
	warnings []fileWarning
	present  []string
	errs     []error
}

// fileWarning is a problem kube-proxy's strict decoding finds in a file and its lenient
// fallback lets through: an unknown field (ignored) or a duplicate field (the last wins).
type fileWarning struct {
	field string
	// suggestion is the known field an unknown one probably meant ("" when none is close).
	suggestion string
	duplicate  bool
	// line is the line of the duplicate in a YAML file (0 when not known).
	line int
}

// member is one "key": value of a JSON object, in document order.
type member struct {
	key string
	raw json.RawMessage
}

// jsonField is one field of a struct as encoding/json sees it.
type jsonField struct {
	name  string
	index []int
}

func (d *strictDecoder) fail(path string, raw json.RawMessage, err error, format string, args ...any) {
	d.errs = append(d.errs, &FieldError{Field: path, Value: displayValue(raw), Detail: fmt.Sprintf(format, args...), Err: err})
}

// decode fills v (addressable) from raw.
func (d *strictDecoder) decode(path string, raw json.RawMessage, v reflect.Value) {
	raw = bytes.TrimSpace(raw)
	if string(raw) == "null" {
		return // as encoding/json: null leaves the value alone
	}
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.decode(path, raw, v.Elem())
		return
	}
	d.present = append(d.present, path)
	if reflect.PointerTo(v.Type()).Implements(reflect.TypeFor[json.Unmarshaler]()) {
		d.leaf(path, raw, v)
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		d.object(path, raw, v)
	case reflect.Map:
		d.mapping(path, raw, v)
	case reflect.Slice:
		d.list(path, raw, v)
	default:
		d.leaf(path, raw, v)
	}
}

func (d *strictDecoder) object(path string, raw json.RawMessage, v reflect.Value) {
	members, err := objectMembers(raw)
	if err != nil {
		d.fail(path, raw, err, "wrong type: expected an object")
		return
	}
	fields := structFields(v.Type())
	seen := map[string]bool{}
	for _, m := range members {
		p := joinPath(path, m.key)
		if seen[m.key] {
			d.warnings = append(d.warnings, fileWarning{field: p, duplicate: true})
		}
		seen[m.key] = true
		i := slices.IndexFunc(fields, func(f jsonField) bool { return f.name == m.key })
		if reason, ok := d.obsolete[p]; ok && i < 0 {
			d.skipped = append(d.skipped, notice{p, reason})
			continue
		}
		if i < 0 {
			w := fileWarning{field: p}
			if s := suggest(m.key, fields); s != "" {
				w.suggestion = joinPath(path, s)
			}
			d.warnings = append(d.warnings, w)
			continue
		}
		// A duplicate is decoded over the earlier value, as encoding/json does: the last
		// scalar or list wins, objects merge.
		d.decode(p, m.raw, v.FieldByIndex(fields[i].index))
	}
}

func (d *strictDecoder) mapping(path string, raw json.RawMessage, v reflect.Value) {
	if v.Type().Key().Kind() != reflect.String {
		d.leaf(path, raw, v)
		return
	}
	members, err := objectMembers(raw)
	if err != nil {
		d.fail(path, raw, err, "wrong type: expected an object")
		return
	}
	if v.IsNil() {
		v.Set(reflect.MakeMap(v.Type()))
	}
	seen := map[string]bool{}
	for _, m := range members {
		p := joinPath(path, m.key)
		if seen[m.key] {
			d.warnings = append(d.warnings, fileWarning{field: p, duplicate: true})
		}
		seen[m.key] = true
		// A duplicate key replaces the earlier value (a fresh element, as encoding/json does).
		elem := reflect.New(v.Type().Elem()).Elem()
		n := len(d.errs)
		d.decode(p, m.raw, elem)
		if len(d.errs) == n {
			v.SetMapIndex(reflect.ValueOf(m.key).Convert(v.Type().Key()), elem)
		}
	}
}

func (d *strictDecoder) list(path string, raw json.RawMessage, v reflect.Value) {
	if v.Type().Elem().Kind() == reflect.Uint8 {
		d.leaf(path, raw, v) // []byte is base64 text
		return
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		d.fail(path, raw, err, "wrong type: expected a list")
		return
	}
	s := reflect.MakeSlice(v.Type(), len(items), len(items))
	for i, it := range items {
		d.decode(fmt.Sprintf("%s[%d]", path, i), it, s.Index(i))
	}
	v.Set(s)
}

func (d *strictDecoder) leaf(path string, raw json.RawMessage, v reflect.Value) {
	err := json.Unmarshal(raw, v.Addr().Interface())
	if err == nil {
		return
	}
	want := describeType(v.Type())
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if strings.HasPrefix(te.Value, "number ") && raw[0] != '"' {
			d.fail(path, raw, err, "out of range: expected %s", want)
			return
		}
		d.fail(path, raw, err, "wrong type: expected %s, got %s", want, jsonKind(raw))
		return
	}
	d.fail(path, raw, err, "expected %s: %v", want, err)
}

// structFields lists the JSON fields of a struct type, flattening embedded structs that
// have no JSON name (",inline"), as encoding/json does.
func structFields(t reflect.Type) []jsonField {
	var out []jsonField
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if sf.Anonymous && name == "" && sf.Type.Kind() == reflect.Struct {
			for _, f := range structFields(sf.Type) {
				out = append(out, jsonField{name: f.name, index: append([]int{i}, f.index...)})
			}
			continue
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		out = append(out, jsonField{name: name, index: []int{i}})
	}
	return out
}

// objectMembers splits a JSON object into its members, keeping duplicates and order.
func objectMembers(raw json.RawMessage) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if delim, ok := tok.(json.Delim); !ok || delim != '{' {
		return nil, fmt.Errorf("got %s", jsonKind(raw))
	}
	var out []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("object key %v is not a string", tok)
		}
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, err
		}
		out = append(out, member{key: key, raw: val})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	return out, nil
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// displayValue renders a JSON value for an error: strings without their quotes, anything
// else as compact JSON.
func displayValue(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) == nil {
		return b.String()
	}
	return string(raw)
}

func jsonKind(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "a list"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

func describeType(t reflect.Type) string {
	if t == reflect.TypeFor[metav1.Duration]() {
		return `a duration such as "30s", "5m" or "1h30m"`
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return fmt.Sprintf("a %d-bit integer", t.Bits())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return fmt.Sprintf("a non-negative %d-bit integer", t.Bits())
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Slice:
		return "a list"
	}
	return t.String()
}

// suggest returns the known field name closest to an unknown key, if one is close.
func suggest(key string, fields []jsonField) string {
	best, bestDist := "", 3
	for _, f := range fields {
		if strings.EqualFold(f.name, key) {
			return f.name
		}
		if dist := editDistance(strings.ToLower(key), strings.ToLower(f.name)); dist < bestDist {
			best, bestDist = f.name, dist
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
