package filesource

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
)

// FuzzDecode feeds arbitrary bytes to the source file's decoder, which nothing upstream
// validated, and checks that
//
//   - it never panics, and decodes the same bytes to the same result twice;
//   - a stream that does not parse yields nothing usable (a revision is applied whole or
//     not at all);
//   - every issue points into the file: a document from 1 on, a line from 1 to the line
//     after the last;
//   - every object it keeps has what the store keys it by: a name and a namespace, and for
//     an EndpointSlice its Service's name label and an address type.
//
// The seeds are the files of testdata/ and a few shapes of JSON and YAML streams.
func FuzzDecode(f *testing.F) {
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil {
		f.Fatal(err)
	}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		`[{"apiVersion":"v1","kind":"Service","metadata":{"name":"a"},"spec":{"clusterIP":"10.96.0.1","ports":[{"port":80}]}}]`,
		`{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Node","metadata":{"name":"node-a"}}]}`,
		"apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: s\n  labels:\n    kubernetes.io/service-name: a\naddressType: IPv4\nendpoints:\n- addresses: [\"10.0.0.1\"]\n",
		"---\n---\n",
		"apiVersion: v1\nkind: ServiceList\nitems:\n- metadata: {name: x}\n- {}\n",
	} {
		f.Add([]byte(s))
	}
	d, err := newDecoder()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		res := d.decode("f.yaml", data, "node-a")
		again := d.decode("f.yaml", data, "node-a")
		if a, b := describeResult(res), describeResult(again); a != b || !reflect.DeepEqual(res.state, again.state) {
			t.Fatalf("two decodes of the same bytes disagree:\n%s\n---\n%s", a, b)
		}
		st := res.state
		if res.syntax != nil && (len(st.Services)+len(st.Slices)+len(st.ServiceCIDRs) > 0 || st.Node != nil || res.usable > 0) {
			t.Fatalf("a stream that does not parse (%v) yielded objects: %s", *res.syntax, describeResult(res))
		}
		lines := bytes.Count(data, []byte("\n")) + 1
		issues := res.issues
		if res.syntax != nil {
			issues = append(issues, *res.syntax)
		}
		for _, is := range issues {
			if is.Document < 1 || is.Line < 1 || is.Line > lines+1 || is.Item < 0 {
				t.Fatalf("issue outside the file of %d lines: document %d line %d item %d: %v", lines, is.Document, is.Line, is.Item, is.Err)
			}
		}
		for _, s := range st.Services {
			if s.Name == "" || s.Namespace == "" {
				t.Fatalf("kept a Service without a name or namespace: %q/%q", s.Namespace, s.Name)
			}
		}
		for _, s := range st.Slices {
			if s.Name == "" || s.Namespace == "" || s.Labels[discoveryv1.LabelServiceName] == "" || s.AddressType == "" {
				t.Fatalf("kept an EndpointSlice without a name, namespace, Service label or address type: %+v", s.ObjectMeta)
			}
		}
		if st.Node != nil && st.Node.Name != "node-a" {
			t.Fatalf("kept another node's Node %q", st.Node.Name)
		}
	})
}

// describeResult renders what a decode returned but the objects, for comparison.
func describeResult(r decodeResult) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "content=%v usable=%d services=%d slices=%d cidrs=%d node=%v\n", r.content, r.usable,
		len(r.state.Services), len(r.state.Slices), len(r.state.ServiceCIDRs), r.state.Node != nil)
	if r.syntax != nil {
		fmt.Fprintf(&b, "syntax: %v\n", *r.syntax)
	}
	for _, is := range r.issues {
		fmt.Fprintf(&b, "issue: %d/%d/%d %s: %v\n", is.Document, is.Line, is.Item, is.Object, is.Err)
	}
	return b.String()
}
