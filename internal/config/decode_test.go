package config

import (
	"encoding/json"
	"errors"
	"net"
	"reflect"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type decodeInner struct {
	Name string `json:"name"`
}

type decodeEmbedded struct {
	Inline string `json:"inline"`
}

type decodeTarget struct {
	decodeEmbedded `json:",inline"`
	Count          *int32            `json:"count"`
	Period         metav1.Duration   `json:"period"`
	Items          []decodeInner     `json:"items"`
	Labels         map[string]string `json:"labels"`
	Skipped        string            `json:"-"`
	Untagged       bool
	hidden         string
}

func TestStrictDecoder(t *testing.T) {
	for _, tc := range []struct {
		name        string
		doc         string
		want        decodeTarget
		wantPresent []string
		wantErrs    []FieldError
		wantWarn    []fileWarning
	}{
		{
			name: "every kind of field",
			doc:  `{"inline":"i","count":3,"period":"1m","items":[{"name":"a"},{"name":"b"}],"labels":{"x":"y"},"Untagged":true}`,
			want: decodeTarget{decodeEmbedded: decodeEmbedded{Inline: "i"}, Count: ptrTo[int32](3),
				Period: metav1.Duration{Duration: 60e9}, Items: []decodeInner{{"a"}, {"b"}}, Labels: map[string]string{"x": "y"}, Untagged: true},
			wantPresent: []string{"", "inline", "count", "period", "items", "items[0]", "items[0].name", "items[1]", "items[1].name", "labels", "labels.x", "Untagged"},
		},
		{
			name:        "nulls are not present",
			doc:         `{"count":null,"items":null}`,
			wantPresent: []string{""},
		},
		{
			name: "errors carry paths",
			doc:  `{"count":"3","items":[{"name":1}],"period":"1 minute"}`,
			wantErrs: []FieldError{
				{Field: "count", Value: "3", Detail: "expected a 32-bit integer, got a string"},
				{Field: "items[0].name", Value: "1", Detail: "expected a string, got a number"},
				{Field: "period", Value: "1 minute", Detail: "duration"},
			},
		},
		{
			name:     "wrong container types",
			doc:      `{"items":{"name":"a"},"labels":["x"]}`,
			wantErrs: []FieldError{{Field: "items", Value: `{"name":"a"}`, Detail: "expected a list"}, {Field: "labels", Value: `["x"]`, Detail: "expected an object"}},
		},
		{
			name:        "unknown fields are skipped with a warning",
			doc:         `{"items":[{"nam":"b"}],"-":"s","hidden":"h","UNTAGGED":true}`,
			want:        decodeTarget{Items: []decodeInner{{}}},
			wantPresent: []string{"", "items", "items[0]"},
			wantWarn: []fileWarning{{field: "items[0].nam", suggestion: "items[0].name"}, {field: "-"}, {field: "hidden"},
				{field: "UNTAGGED", suggestion: "Untagged"}},
		},
		{
			name: "the last duplicate wins, objects merge",
			doc:  `{"inline":"a","inline":"b","labels":{"x":"y","x":"z"},"labels":{"w":"v"},"items":[{"name":"a"}],"items":[]}`,
			want: decodeTarget{decodeEmbedded: decodeEmbedded{Inline: "b"}, Labels: map[string]string{"x": "z", "w": "v"},
				Items: []decodeInner{}},
			wantPresent: []string{"", "inline", "inline", "labels", "labels.x", "labels.x", "labels", "labels.w", "items", "items[0]", "items[0].name", "items"},
			wantWarn:    []fileWarning{{field: "inline", duplicate: true}, {field: "labels.x", duplicate: true}, {field: "labels", duplicate: true}, {field: "items", duplicate: true}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got decodeTarget
			var d strictDecoder
			d.decode("", json.RawMessage(tc.doc), reflect.ValueOf(&got).Elem())
			if len(tc.wantErrs) > 0 {
				wantFieldErrors(t, errors.Join(d.errs...), tc.wantErrs...)
				return
			}
			if len(d.errs) > 0 {
				t.Fatalf("unexpected errors: %v", errors.Join(d.errs...))
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(decodeTarget{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if !slices.Equal(d.present, tc.wantPresent) {
				t.Errorf("present %q, want %q", d.present, tc.wantPresent)
			}
			if diff := cmp.Diff(tc.wantWarn, d.warnings, cmp.AllowUnexported(fileWarning{})); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFieldErrorUnwraps(t *testing.T) {
	_, err := loadArgs(t, nil, "--cluster-cidr=10.0.0.0/99")
	var pe *net.ParseError
	if !errors.As(err, &pe) {
		t.Errorf("the CIDR parse error is not reachable through %v", err)
	}
}

func TestSuggest(t *testing.T) {
	fields := structFields(reflect.TypeFor[decodeTarget]())
	for key, want := range map[string]string{"inlin": "inline", "COUNT": "count", "periods": "period", "zebra": "", "untagged": "Untagged"} {
		if got := suggest(key, fields); got != want {
			t.Errorf("suggest(%q) = %q, want %q", key, got, want)
		}
	}
}

func TestFieldErrorMessage(t *testing.T) {
	for _, tc := range []struct {
		err  FieldError
		want string
	}{
		{FieldError{Field: "ipvs.syncPeriod", Flag: "--ipvs-sync-period", Value: "0s", Detail: "must be greater than 0"},
			`ipvs.syncPeriod (--ipvs-sync-period): "0s": must be greater than 0`},
		{FieldError{Field: "ipvs.schedular", Value: "rr", Detail: "unknown field"}, `ipvs.schedular: "rr": unknown field`},
		{FieldError{Flag: "--kipvs-service-cidr", Value: "x", Detail: "bad"}, `--kipvs-service-cidr: "x": bad`},
		{FieldError{Field: "detectLocal.bridgeInterface", Value: "", Detail: "must be set"}, `detectLocal.bridgeInterface: "": must be set`},
		{FieldError{Field: "items", Value: `{"name":"a"}`, Detail: "expected a list"}, "items: `{\"name\":\"a\"}`: expected a list"},
		{FieldError{Field: "x", Value: "a\"b\nc", Detail: "d"}, `x: "a\"b\nc": d`},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
	}
}
