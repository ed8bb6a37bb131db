package filesource

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kipvs/kipvs/internal/watch"
	"github.com/kipvs/kipvs/internal/watch/watchtest"
)

func mustDecoder(t *testing.T) *decoder {
	t.Helper()
	d, err := newDecoder()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// objectsOf lists a decoded state as "Kind ns/name" strings, in order.
func objectsOf(st watch.State) []string {
	var out []string
	for _, s := range st.Services {
		out = append(out, "Service "+s.Namespace+"/"+s.Name)
	}
	for _, s := range st.Slices {
		out = append(out, "EndpointSlice "+s.Namespace+"/"+s.Name)
	}
	if st.Node != nil {
		out = append(out, "Node "+st.Node.Name)
	}
	for _, c := range st.ServiceCIDRs {
		out = append(out, "ServiceCIDR "+c.Name)
	}
	return out
}

// issueLines renders issues as "doc D line L item I: <error text>".
func issueLines(is []DecodeIssue) []string {
	var out []string
	for _, i := range is {
		out = append(out, fmt.Sprintf("doc %d line %d item %d: %v", i.Document, i.Line, i.Item, i.Err))
	}
	return out
}

// matchIssues checks that got has one issue per want entry, in order, each starting with the
// entry's "doc D line L item I" prefix and containing its text after the prefix.
func matchIssues(t *testing.T, got []DecodeIssue, want []string) {
	t.Helper()
	lines := issueLines(got)
	if len(lines) != len(want) {
		t.Fatalf("issues:\n got  %q\n want %q", lines, want)
	}
	for i, w := range want {
		prefix, text, _ := strings.Cut(w, ": ")
		if !strings.HasPrefix(lines[i], prefix+": ") || !strings.Contains(lines[i], text) {
			t.Errorf("issue %d = %q, want prefix %q containing %q", i, lines[i], prefix, text)
		}
	}
}

func TestDecodeSample(t *testing.T) {
	data, err := os.ReadFile("testdata/sample.yaml")
	if err != nil {
		t.Fatal(err)
	}
	res := mustDecoder(t).decode("testdata/sample.yaml", data, "node-a")
	matchIssues(t, res.issues, nil)
	watchtest.AssertLines(t, "objects", objectsOf(res.state), []string{
		"Service default/web", "Service kube-system/dns-udp", "Service default/db",
		"EndpointSlice default/web-7xk2p", "EndpointSlice kube-system/dns-udp-q9v4t", "EndpointSlice default/db-h2k8d",
		"Node node-a",
	})
	dns := res.state.Services[1]
	if p := dns.Spec.Ports[0]; dns.Spec.Type != v1.ServiceTypeNodePort || p.Protocol != v1.ProtocolUDP || p.NodePort != 30053 || p.TargetPort != intstr.FromInt32(5353) {
		t.Errorf("dns-udp decoded as %+v", dns.Spec)
	}
	if n := len(res.state.Slices[0].Endpoints); n != 3 {
		t.Errorf("web slice has %d endpoints, want 3", n)
	}
}

func TestDecodeMalformed(t *testing.T) {
	data, err := os.ReadFile("testdata/malformed.yaml")
	if err != nil {
		t.Fatal(err)
	}
	res := mustDecoder(t).decode("malformed.yaml", data, "")
	matchIssues(t, res.issues, []string{
		"doc 2 line 10 item 0: unsupported kind apps/v1 Deployment",
		"doc 3 line 16 item 0: decoding",
		"doc 4 line 21 item 0: unknown field \"spec.prots\"",
		"doc 5 line 31 item 0: label kubernetes.io/service-name is required",
		"doc 6 line 39 item 0: missing kind",
	})
	watchtest.AssertLines(t, "objects", objectsOf(res.state), []string{"Service default/good", "EndpointSlice default/good-abc"})
	if got := res.issues[0].Error(); !strings.HasPrefix(got, "malformed.yaml: document 2 (line 10): Deployment nope: unsupported kind") {
		t.Errorf("issue text = %q", got)
	}
	// Objects are named whenever their metadata can be read.
	for i, want := range []string{"Deployment nope", "", "Service default/typo", "EndpointSlice default/orphan", ""} {
		if res.issues[i].Object != want {
			t.Errorf("issue %d names %q, want %q", i, res.issues[i].Object, want)
		}
	}
}

func TestDecodeFormats(t *testing.T) {
	const svcA = `{"apiVersion":"v1","kind":"Service","metadata":{"name":"a","namespace":"ns"},"spec":{"clusterIP":"10.96.0.1","ports":[{"port":80}]}}`
	const svcB = `{"apiVersion":"v1","kind":"Service","metadata":{"name":"b","namespace":"ns"},"spec":{"clusterIP":"10.96.0.2","ports":[{"port":80}]}}`
	const sliceA = `{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"a-1","namespace":"ns","labels":{"kubernetes.io/service-name":"a"}},"addressType":"IPv4","endpoints":[{"addresses":["10.0.0.1"]}]}`

	tests := []struct {
		name       string
		nodeName   string
		in         string
		wantObjs   []string
		wantIssues []string
		check      func(t *testing.T, st watch.State)
	}{
		{
			name:     "JSON stream of concatenated objects",
			in:       svcA + "\n" + sliceA + "\n\n" + svcB,
			wantObjs: []string{"Service ns/a", "Service ns/b", "EndpointSlice ns/a-1"},
		},
		{
			name:     "JSON top-level array",
			in:       "[\n" + svcA + ",\n" + sliceA + "\n]",
			wantObjs: []string{"Service ns/a", "EndpointSlice ns/a-1"},
		},
		{
			name:     "v1 List in JSON",
			in:       `{"apiVersion":"v1","kind":"List","items":[` + svcA + "," + sliceA + `]}`,
			wantObjs: []string{"Service ns/a", "EndpointSlice ns/a-1"},
		},
		{
			name: "v1 List in YAML with a bad item and a nested list",
			in: `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Service
  metadata: {name: a, namespace: ns}
  spec: {clusterIP: 10.96.0.1, ports: [{port: 80}]}
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: cm}
- apiVersion: v1
  kind: List
  items: []
`,
			wantObjs: []string{"Service ns/a"},
			wantIssues: []string{
				"doc 1 line 1 item 2: unsupported kind v1 ConfigMap",
				"doc 1 line 1 item 3: lists inside lists are not supported",
			},
		},
		{
			name:     "typed ServiceList",
			in:       `{"apiVersion":"v1","kind":"ServiceList","items":[` + svcA + "," + svcB + `]}`,
			wantObjs: []string{"Service ns/a", "Service ns/b"},
		},
		{
			name: "YAML: comment-only and empty documents are skipped but counted, separators may carry comments",
			in: `# header comment
--- # first real one follows
` + svcA + `
---

---
# nothing here
...
---
apiVersion: v1
kind: Pod
metadata: {name: p}
`,
			wantObjs:   []string{"Service ns/a"},
			wantIssues: []string{"doc 5 line 10 item 0: unsupported kind v1 Pod"},
		},
		{
			name:       "duplicates: the later object wins and is reported",
			in:         svcA + "\n" + strings.Replace(svcA, "10.96.0.1", "10.96.0.9", 1),
			wantObjs:   []string{"Service ns/a"},
			wantIssues: []string{"doc 2 line 2 item 0: duplicate of document 1; this later one is used"},
			check: func(t *testing.T, st watch.State) {
				if ip := st.Services[0].Spec.ClusterIP; ip != "10.96.0.9" {
					t.Errorf("kept clusterIP %s, want the later 10.96.0.9", ip)
				}
			},
		},
		{
			name: "missing names, missing addressType, bad ServiceCIDR",
			in: `apiVersion: v1
kind: Service
spec: {clusterIP: 10.96.0.1}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: x, labels: {kubernetes.io/service-name: a}}
---
apiVersion: networking.k8s.io/v1
kind: ServiceCIDR
metadata: {name: bad}
spec: {cidrs: [10.96.0.0/33]}
---
apiVersion: networking.k8s.io/v1
kind: ServiceCIDR
metadata: {name: good}
spec: {cidrs: [10.96.0.0/12]}
`,
			wantObjs: []string{"ServiceCIDR good"},
			wantIssues: []string{
				"doc 1 line 1 item 0: metadata.name is required",
				"doc 2 line 5 item 0: addressType is required",
				"doc 3 line 9 item 0: spec.cidrs",
			},
		},
		{
			name:     "only the Node named like this node is used",
			nodeName: "n2",
			in: `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"}}
{"apiVersion":"v1","kind":"Node","metadata":{"name":"n2"}}`,
			wantObjs: []string{"Node n2"},
		},
		{
			name:     "no node name: no Node",
			in:       `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"}}`,
			wantObjs: nil,
		},
		{
			name:       "missing apiVersion",
			in:         `{"kind":"Service","metadata":{"name":"a"}}`,
			wantIssues: []string{"doc 1 line 1 item 0: missing apiVersion"},
		},
		{
			name:     "empty file",
			in:       "\n# just a comment\n",
			wantObjs: nil,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := mustDecoder(t).decode("f", []byte(tc.in), tc.nodeName)
			matchIssues(t, res.issues, tc.wantIssues)
			watchtest.AssertLines(t, "objects", objectsOf(res.state), tc.wantObjs)
			if tc.check != nil {
				tc.check(t, res.state)
			}
		})
	}
}

func TestDefaultService(t *testing.T) {
	res := mustDecoder(t).decode("f", []byte(`
apiVersion: v1
kind: Service
metadata: {name: lb}
spec:
  type: LoadBalancer
  clusterIP: 10.96.0.5
  sessionAffinity: ClientIP
  ports: [{port: 443}, {port: 53, protocol: UDP, targetPort: dns}]
status:
  loadBalancer: {ingress: [{ip: 192.0.2.10}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: lb-1, labels: {kubernetes.io/service-name: lb}}
addressType: IPv6
ports: [{port: 8443}]
`), "")
	matchIssues(t, res.issues, nil)
	svc := res.state.Services[0]
	sp := svc.Spec
	checks := []struct {
		what      string
		got, want any
	}{
		{"namespace", svc.Namespace, "default"},
		{"clusterIPs", fmt.Sprint(sp.ClusterIPs), "[10.96.0.5]"},
		{"ipFamilies", fmt.Sprint(sp.IPFamilies), "[IPv4]"},
		{"ipFamilyPolicy", *sp.IPFamilyPolicy, v1.IPFamilyPolicySingleStack},
		{"port 0 protocol", sp.Ports[0].Protocol, v1.ProtocolTCP},
		{"port 0 targetPort", sp.Ports[0].TargetPort, intstr.FromInt32(443)},
		{"port 1 targetPort", sp.Ports[1].TargetPort, intstr.FromString("dns")},
		{"affinity timeout", *sp.SessionAffinityConfig.ClientIP.TimeoutSeconds, v1.DefaultClientIPServiceAffinitySeconds},
		{"externalTrafficPolicy", sp.ExternalTrafficPolicy, v1.ServiceExternalTrafficPolicyCluster},
		{"internalTrafficPolicy", *sp.InternalTrafficPolicy, v1.ServiceInternalTrafficPolicyCluster},
		{"allocateLoadBalancerNodePorts", *sp.AllocateLoadBalancerNodePorts, true},
		{"ingress ipMode", *svc.Status.LoadBalancer.Ingress[0].IPMode, v1.LoadBalancerIPModeVIP},
		{"slice namespace", res.state.Slices[0].Namespace, "default"},
		{"slice port protocol", *res.state.Slices[0].Ports[0].Protocol, v1.ProtocolTCP},
		{"slice port name", *res.state.Slices[0].Ports[0].Name, ""},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}
}

func TestSplitYAMLLines(t *testing.T) {
	in := "a: 1\n---\n\n\nb: 2\n--- c: 3\n---\n"
	docs := splitYAML([]byte(in))
	var got []string
	for _, d := range docs {
		got = append(got, fmt.Sprintf("%d@%d:%q", d.index, d.line, d.data))
	}
	watchtest.AssertLines(t, "docs", got, []string{`1@1:"a: 1\n"`, `2@3:"\n\nb: 2\n"`, `3@6:"c: 3\n"`})
}

// Revisions that must not be applied at all, and the borderline ones that must.
func TestDecodeRevisionErrors(t *testing.T) {
	const svcA = `{"apiVersion":"v1","kind":"Service","metadata":{"name":"a","namespace":"ns"},"spec":{"clusterIP":"10.96.0.1","ports":[{"port":80}]}}`
	const yamlSvc = "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {clusterIP: 10.96.0.1}\n"
	tests := []struct {
		name     string
		in       string
		want     error  // nil: the revision is applied
		wantText string // in the error
		wantObjs []string
	}{
		{"0 bytes", "", errEmptyRevision, "f has no documents", nil},
		{"blank lines", "\n \t\n", errEmptyRevision, "", nil},
		{"comments and separators only", "# x\n---\n# y\n...\n", errEmptyRevision, "", nil},
		{"BOM only", "\xef\xbb\xbf", errEmptyRevision, "", nil},
		{"JSON empty array: deliberate", "[]", nil, "", nil},
		{"JSON empty List: deliberate", `{"apiVersion":"v1","kind":"List","items":[]}`, nil, "", nil},
		{"YAML empty List: deliberate", "apiVersion: v1\nkind: List\nitems: []\n", nil, "", nil},
		{"YAML empty ServiceList: deliberate", "apiVersion: v1\nkind: ServiceList\nitems: []\n", nil, "", nil},
		{"JSON syntax error after a good object", svcA + "\n" + `{"apiVersion": "v1", "kind":`, errSyntax, "f: document 2 (line 2): invalid JSON", nil},
		{"JSON truncated array", "[\n" + svcA + ",\n{\"apiVersion\"", errSyntax, "document 1 (line 1): invalid JSON: unexpected EOF", nil},
		{"JSON scalar", svcA + "\n42\n", errSyntax, "document 2 (line 2): the document is a scalar, not an object", nil},
		{"YAML syntax error: absolute line", yamlSvc + "---\n\napiVersion: v1\nkind: Service\nmetadata: {name: b\n", errSyntax, "document 2 (line 9): invalid YAML: yaml: line 9:", nil},
		{"YAML bad indentation", yamlSvc + "---\napiVersion: v1\n kind: Service\n", errSyntax, "document 2 (line 7): invalid YAML: yaml: line 7: mapping values", nil},
		{"YAML scalar document (a truncated key)", yamlSvc + "---\napiVers", errSyntax, "document 2 (line 6): the document is a scalar, not an object", nil},
		{"YAML sequence document", yamlSvc + "---\n- a\n- b\n", errSyntax, "the document is a list, not an object", nil},
		{"nothing usable", strings.Replace(yamlSvc, "Service", "Servce", 1), errNothingUsable, "unsupported kind v1 Servce", nil},
		{"one usable object is enough", yamlSvc + "---\n" + strings.Replace(yamlSvc, "Service", "Servce", 1), nil, "", []string{"Service default/a"}},
		{"another node's Node is usable", `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"}}`, nil, "", nil},
		{
			"typed list: items decoded one by one, apiVersion and kind defaulted",
			`{"apiVersion":"v1","kind":"ServiceList","items":[` +
				`{"metadata":{"name":"a"},"spec":{"clusterIP":"10.96.0.1"}},` +
				`{"metadata":{"name":"b"},"spec":{"clusterIP":"10.96.0.2","bogus":1}},` +
				`{"apiVersion":"v1","kind":"List","items":[]},` +
				`null,` +
				`{"metadata":{"name":"c"},"spec":{"clusterIP":"10.96.0.3"}}]}`,
			nil, "", []string{"Service default/a", "Service default/c"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := mustDecoder(t).decode("f", []byte(tc.in), "")
			err := res.revisionError("f")
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("revisionError() = %v, want %v", err, tc.want)
			}
			if err != nil && !strings.Contains(err.Error(), tc.wantText) {
				t.Errorf("revisionError() = %q, want it to contain %q", err, tc.wantText)
			}
			if err == nil {
				watchtest.AssertLines(t, "objects", objectsOf(res.state), tc.wantObjs)
			}
		})
	}
}

// Each bad item of a typed list is reported with its position and field.
func TestDecodeTypedListIssues(t *testing.T) {
	res := mustDecoder(t).decode("f", []byte(`apiVersion: discovery.k8s.io/v1
kind: EndpointSliceList
items:
- metadata: {name: s1, labels: {kubernetes.io/service-name: a}}
  addressType: IPv4
- metadata: {name: s2, labels: {kubernetes.io/service-name: a}}
  addressType: IPv4
  endpoints: [{adresses: [10.0.0.1]}]
- metadata: {name: s3}
  addressType: IPv4
- apiVersion: v1
  kind: ServiceList
  items: []
`), "")
	matchIssues(t, res.issues, []string{
		`doc 1 line 1 item 2: unknown field "endpoints[0].adresses"`,
		"doc 1 line 1 item 3: label kubernetes.io/service-name is required",
		"doc 1 line 1 item 4: lists inside lists are not supported",
	})
	watchtest.AssertLines(t, "objects", objectsOf(res.state), []string{"EndpointSlice default/s1"})
	for i, want := range []string{"EndpointSlice default/s2", "EndpointSlice default/s3", ""} {
		if res.issues[i].Object != want {
			t.Errorf("issue %d names %q, want %q", i, res.issues[i].Object, want)
		}
	}
}

// TestSplitJSONLines: every document of a long JSON stream (some inside a top-level array)
// carries the line it starts on.
func TestSplitJSONLines(t *testing.T) {
	var b strings.Builder
	want := []int{}
	line := 1
	for i := range 300 {
		obj := fmt.Sprintf(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"s%d"}}`, i)
		switch i % 3 {
		case 0:
			want = append(want, line)
			b.WriteString(obj + "\n")
			line++
		case 1:
			b.WriteString("\n\n")
			line += 2
			want = append(want, line)
			b.WriteString(obj + "\n")
			line++
		case 2:
			b.WriteString("[\n")
			line++
			want = append(want, line, line+1)
			b.WriteString(obj + ",\n" + obj + "\n]\n")
			line += 3
		}
	}
	docs, err := splitJSON([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != len(want) {
		t.Fatalf("%d documents, want %d", len(docs), len(want))
	}
	for i, d := range docs {
		if d.line != want[i] || d.index != i+1 {
			t.Fatalf("document %d: index %d line %d, want index %d line %d", i, d.index, d.line, i+1, want[i])
		}
	}
}

// BenchmarkSplitJSON10k splits a 10,000-Service JSON stream (20,000 documents). It was
// quadratic in the number of documents (the line of each counted from the file's start).
func BenchmarkSplitJSON10k(b *testing.B) {
	var sb strings.Builder
	for i := range 20000 {
		fmt.Fprintf(&sb, `{"apiVersion":"v1","kind":"Service","metadata":{"name":"bench-%05d","namespace":"default"},"spec":{"clusterIP":"10.96.0.1","ports":[{"port":80}]}}`+"\n", i)
	}
	data := []byte(sb.String())
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := splitJSON(data); err != nil {
			b.Fatal(err)
		}
	}
}
