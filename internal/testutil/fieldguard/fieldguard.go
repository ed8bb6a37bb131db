package fieldguard

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

// Mutation is a copy of the base value with one thing changed.
type Mutation[T any] struct {
	// Path names the change: "Destinations[1].Weight", "NodeLabels[zone]", "SchedFlags(len+1)".
	Path string
	// Field is Path without indices and keys ("Destinations[].Weight"), as ignore lists name it.
	Field string
	Value T
}

// Mutations returns every single change of base.
func Mutations[T any](base T) ([]Mutation[T], error) {
	v := addressable(reflect.ValueOf(&base).Elem())
	var out []Mutation[T]
	err := mutate(v, "", "", func(path, field string, nv reflect.Value) {
		out = append(out, Mutation[T]{Path: path, Field: field, Value: nv.Interface().(T)})
	})
	return out, err
}

// Check fails t for every field of base whose change differ does not notice, unless the
// field is in ignored (field path -> why it is left out); an ignored field whose change is
// noticed, and an ignored path that names no field, fail too, so the list stays exact.
func Check[T any](t testing.TB, base T, ignored map[string]string, differ func(a, b T) bool) {
	t.Helper()
	for _, p := range Problems(base, ignored, differ) {
		t.Error(p)
	}
}

// Problems is Check's findings.
func Problems[T any](base T, ignored map[string]string, differ func(a, b T) bool) []string {
	var out []string
	if differ(base, base) {
		out = append(out, "a value differs from itself")
	}
	muts, err := Mutations(base)
	if err != nil {
		out = append(out, err.Error())
	}
	used := map[string]bool{}
	for _, m := range muts {
		key, why, ign := ignoredBy(ignored, m.Field)
		noticed := differ(base, m.Value) || differ(m.Value, base)
		switch {
		case !ign && !noticed:
			out = append(out, fmt.Sprintf("a change of %s is not noticed: compare it, or list %s as ignored with the reason", m.Path, m.Field))
		case ign && noticed:
			out = append(out, fmt.Sprintf("%s is listed as ignored (%s) but its change %s is noticed: take it off the list", key, why, m.Path))
		}
		if ign {
			used[key] = true
		}
	}
	return append(out, unused(ignored, used)...)
}

// CheckPresence fails t unless empty(zero value) holds and, for every top-level field of
// populated (each must be non-zero) not in ignored, a zero value with just that field set
// is not empty; an ignored field set alone must still be empty.
func CheckPresence[T any](t testing.TB, populated T, ignored map[string]string, empty func(T) bool) {
	t.Helper()
	for _, p := range PresenceProblems(populated, ignored, empty) {
		t.Error(p)
	}
}

// PresenceProblems is CheckPresence's findings.
func PresenceProblems[T any](populated T, ignored map[string]string, empty func(T) bool) []string {
	var out []string
	var zero T
	if !empty(zero) {
		out = append(out, "the zero value is not empty")
	}
	src := addressable(reflect.ValueOf(&populated).Elem())
	if src.Kind() != reflect.Struct {
		return append(out, fmt.Sprintf("%s is not a struct", src.Type()))
	}
	used := map[string]bool{}
	for i := range src.NumField() {
		name := src.Type().Field(i).Name
		f := fieldOf(src, i)
		if f.IsZero() {
			out = append(out, fmt.Sprintf("populate %s: it is zero", name))
			continue
		}
		one := reflect.New(src.Type()).Elem()
		fieldOf(one, i).Set(f)
		got := empty(one.Interface().(T))
		key, why, ign := ignoredBy(ignored, name)
		switch {
		case !ign && got:
			out = append(out, fmt.Sprintf("a value with only %s set counts as empty: check it, or list it as ignored with the reason", name))
		case ign && !got:
			out = append(out, fmt.Sprintf("%s is listed as ignored (%s) but a value with only it set is not empty: take it off the list", key, why))
		}
		if ign {
			used[key] = true
		}
	}
	return append(out, unused(ignored, used)...)
}

func unused(ignored map[string]string, used map[string]bool) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(ignored)) {
		switch {
		case ignored[k] == "":
			out = append(out, fmt.Sprintf("ignored field %s has no reason", k))
		case !used[k]:
			out = append(out, fmt.Sprintf("ignored field %s names no field", k))
		}
	}
	return out
}

// ignoredBy finds the ignore entry covering field: the field itself or a parent of it.
func ignoredBy(ignored map[string]string, field string) (key, why string, ok bool) {
	for k, why := range ignored {
		if field == k || (strings.HasPrefix(field, k) && strings.ContainsRune(".[(", rune(field[len(k)]))) {
			return k, why, true
		}
	}
	return "", "", false
}

// mutate calls emit with a changed copy of v for every single change inside v. v and every
// value it reaches are read through addressable views, so unexported fields can be set.
func mutate(v reflect.Value, path, field string, emit func(path, field string, nv reflect.Value)) error {
	at := func(p string) string {
		if p == "" {
			return "the value"
		}
		return p
	}
	if nv, ok := leaf(v); ok {
		emit(path, field, nv)
		return nil
	}
	switch v.Kind() {
	case reflect.Bool:
		emit(path, field, reflect.ValueOf(!v.Bool()).Convert(v.Type()))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		nv := reflect.New(v.Type()).Elem()
		nv.SetInt(v.Int() + 1)
		emit(path, field, nv)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		nv := reflect.New(v.Type()).Elem()
		nv.SetUint(v.Uint() + 1)
		if nv.Uint() == 0 {
			return fmt.Errorf("%s is the largest %s: pick a base value that can grow", at(path), v.Type())
		}
		emit(path, field, nv)
	case reflect.Float32, reflect.Float64:
		nv := reflect.New(v.Type()).Elem()
		nv.SetFloat(v.Float() + 1)
		emit(path, field, nv)
	case reflect.String:
		nv := reflect.New(v.Type()).Elem()
		nv.SetString(v.String() + "x")
		emit(path, field, nv)
	case reflect.Struct:
		var errs []error
		for i := range v.NumField() {
			name := v.Type().Field(i).Name
			p, f := join(path, name), join(field, name)
			err := mutate(fieldOf(v, i), p, f, func(mp, mf string, fv reflect.Value) {
				nv := reflect.New(v.Type()).Elem()
				nv.Set(v)
				fieldOf(nv, i).Set(fv)
				emit(mp, mf, nv)
			})
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	case reflect.Pointer:
		if v.IsNil() {
			return fmt.Errorf("%s is nil: populate it", at(path))
		}
		return mutate(v.Elem(), path, field, func(mp, mf string, ev reflect.Value) {
			nv := reflect.New(v.Type().Elem())
			nv.Elem().Set(ev)
			emit(mp, mf, nv)
		})
	case reflect.Interface:
		if v.IsNil() {
			return fmt.Errorf("%s is nil: populate it", at(path))
		}
		return mutate(addressable(v.Elem()), path, field, func(mp, mf string, ev reflect.Value) {
			nv := reflect.New(v.Type()).Elem()
			nv.Set(ev)
			emit(mp, mf, nv)
		})
	case reflect.Array:
		var errs []error
		for i := range v.Len() {
			errs = append(errs, mutate(v.Index(i), fmt.Sprintf("%s[%d]", path, i), field+"[]", func(mp, mf string, ev reflect.Value) {
				nv := reflect.New(v.Type()).Elem()
				nv.Set(v)
				nv.Index(i).Set(ev)
				emit(mp, mf, nv)
			}))
		}
		return errors.Join(errs...)
	case reflect.Slice:
		n := v.Len()
		if n == 0 {
			return fmt.Errorf("%s is empty: populate it", at(path))
		}
		clone := func(extra int) reflect.Value {
			nv := reflect.MakeSlice(v.Type(), n+extra, n+extra)
			reflect.Copy(nv, v)
			return nv
		}
		shorter := clone(0).Slice(0, n-1)
		emit(path+"(len-1)", field+"(len)", shorter)
		longer := clone(1)
		longer.Index(n).Set(v.Index(n - 1))
		emit(path+"(len+1)", field+"(len)", longer)
		var errs []error
		for i := range n {
			errs = append(errs, mutate(addressable(v.Index(i)), fmt.Sprintf("%s[%d]", path, i), field+"[]", func(mp, mf string, ev reflect.Value) {
				nv := clone(0)
				nv.Index(i).Set(ev)
				emit(mp, mf, nv)
			}))
		}
		return errors.Join(errs...)
	case reflect.Map:
		if v.Len() == 0 {
			return fmt.Errorf("%s is empty: populate it", at(path))
		}
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return cmp.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
		clone := func() reflect.Value {
			nv := reflect.MakeMapWithSize(v.Type(), v.Len())
			for _, k := range keys {
				nv.SetMapIndex(k, v.MapIndex(k))
			}
			return nv
		}
		var errs []error
		for _, k := range keys {
			p := fmt.Sprintf("%s[%v]", path, k)
			without := clone()
			without.SetMapIndex(k, reflect.Value{})
			emit(p+"(deleted)", field+"(len)", without)
			errs = append(errs, mutate(addressable(k), p+"(key)", field+"(key)", func(mp, mf string, nk reflect.Value) {
				if v.MapIndex(nk).IsValid() {
					return // the changed key is another entry's
				}
				nv := clone()
				nv.SetMapIndex(k, reflect.Value{})
				nv.SetMapIndex(nk, v.MapIndex(k))
				emit(mp, mf, nv)
			}))
			errs = append(errs, mutate(addressable(v.MapIndex(k)), p, field+"[]", func(mp, mf string, ev reflect.Value) {
				nv := clone()
				nv.SetMapIndex(k, ev)
				emit(mp, mf, nv)
			}))
		}
		return errors.Join(errs...)
	default:
		return fmt.Errorf("%s: cannot change a %s", at(path), v.Kind())
	}
	return nil
}

// leaf changes values whose insides are not the compared thing: they compare with ==.
func leaf(v reflect.Value) (reflect.Value, bool) {
	switch x := v.Interface().(type) {
	case netip.Addr:
		if !x.IsValid() {
			return reflect.ValueOf(netip.MustParseAddr("192.0.2.1")), true
		}
		return reflect.ValueOf(x.Next()), true
	case netip.AddrPort:
		return reflect.ValueOf(netip.AddrPortFrom(x.Addr(), x.Port()+1)), true
	case netip.Prefix:
		if !x.IsValid() {
			return reflect.ValueOf(netip.MustParsePrefix("192.0.2.0/24")), true
		}
		bits := x.Bits() + 1
		if bits > x.Addr().BitLen() {
			bits = x.Bits() - 1
		}
		return reflect.ValueOf(netip.PrefixFrom(x.Addr(), bits)), true
	}
	return reflect.Value{}, false
}

// addressable returns v itself when it can be set through, else a settable copy.
func addressable(v reflect.Value) reflect.Value {
	if v.CanAddr() {
		return v
	}
	c := reflect.New(v.Type()).Elem()
	c.Set(v)
	return c
}

// fieldOf is field i of the addressable struct v, settable even when unexported.
func fieldOf(v reflect.Value, i int) reflect.Value {
	f := v.Field(i)
	return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "." + b
}
