package fieldguard

import (
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
)

type inner struct {
	A int
	b string
}

type toy struct {
	Name string
	n    uint8
	In   inner
	P    *inner
	List []inner
	M    map[string]int
	Addr netip.Addr
	Skip bool
}

func populated() toy {
	return toy{
		Name: "x", n: 1, In: inner{1, "b"}, P: &inner{2, "c"},
		List: []inner{{3, "d"}, {4, "e"}}, M: map[string]int{"k": 5},
		Addr: netip.MustParseAddr("10.0.0.1"), Skip: true,
	}
}

// forgetful compares everything but inner.b and Skip, by hand.
func forgetful(a, b toy) bool {
	if a.Name != b.Name || a.n != b.n || a.In.A != b.In.A || a.P.A != b.P.A || a.Addr != b.Addr ||
		len(a.List) != len(b.List) || !reflect.DeepEqual(a.M, b.M) {
		return true
	}
	for i := range a.List {
		if a.List[i].A != b.List[i].A {
			return true
		}
	}
	return false
}

func deepDiffer(a, b toy) bool { return !reflect.DeepEqual(a, b) }

func TestMutationsReachEveryField(t *testing.T) {
	muts, err := Mutations(populated())
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, m := range muts {
		paths = append(paths, m.Path+" = "+m.Field)
		if !deepDiffer(populated(), m.Value) {
			t.Errorf("%s: the mutation changed nothing", m.Path)
		}
	}
	want := []string{
		"Name = Name", "n = n", "In.A = In.A", "In.b = In.b", "P.A = P.A", "P.b = P.b",
		"List(len-1) = List(len)", "List(len+1) = List(len)",
		"List[0].A = List[].A", "List[0].b = List[].b", "List[1].A = List[].A", "List[1].b = List[].b",
		"M[k](deleted) = M(len)", "M[k](key) = M(key)", "M[k] = M[]",
		"Addr = Addr", "Skip = Skip",
	}
	if !slices.Equal(paths, want) {
		t.Errorf("mutations:\n%s\nwant:\n%s", strings.Join(paths, "\n"), strings.Join(want, "\n"))
	}
	if base := populated(); base.P.A != 2 || base.List[0].A != 3 || base.M["k"] != 5 {
		t.Errorf("the base value was changed: %+v", base)
	}
}

func TestProblems(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ignored map[string]string
		differ  func(a, b toy) bool
		want    []string
	}{
		{name: "complete", differ: deepDiffer},
		{
			name: "forgotten fields", differ: forgetful, ignored: map[string]string{"Skip": "not compared"},
			want: []string{
				"a change of In.b is not noticed: compare it, or list In.b as ignored with the reason",
				"a change of P.b is not noticed: compare it, or list P.b as ignored with the reason",
				"a change of List[0].b is not noticed: compare it, or list List[].b as ignored with the reason",
				"a change of List[1].b is not noticed: compare it, or list List[].b as ignored with the reason",
			},
		},
		{
			name: "stale ignore list", differ: deepDiffer, ignored: map[string]string{"Skip": "was not compared", "Gone": "removed", "Name": ""},
			want: []string{
				"Name is listed as ignored () but its change Name is noticed: take it off the list",
				"Skip is listed as ignored (was not compared) but its change Skip is noticed: take it off the list",
				"ignored field Gone names no field",
				"ignored field Name has no reason",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Problems(populated(), tc.ignored, tc.differ); !slices.Equal(got, tc.want) {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestUnpopulatedBase(t *testing.T) {
	base := populated()
	base.P, base.List, base.n = nil, nil, 255
	want := []string{"n is the largest uint8: pick a base value that can grow\nP is nil: populate it\nList is empty: populate it"}
	if got := Problems(base, nil, deepDiffer); !slices.Equal(got, want) {
		t.Errorf("problems:\n%q\nwant:\n%q", got, want)
	}
}

func TestPresenceProblems(t *testing.T) {
	empty := func(v toy) bool { return v.Name == "" && len(v.List) == 0 && v.P == nil }
	got := PresenceProblems(populated(), map[string]string{"n": "a counter", "P": "stale"}, empty)
	want := []string{
		"a value with only In set counts as empty: check it, or list it as ignored with the reason",
		"P is listed as ignored (stale) but a value with only it set is not empty: take it off the list",
		"a value with only M set counts as empty: check it, or list it as ignored with the reason",
		"a value with only Addr set counts as empty: check it, or list it as ignored with the reason",
		"a value with only Skip set counts as empty: check it, or list it as ignored with the reason",
	}
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
