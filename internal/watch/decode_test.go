package watch

import (
	"fmt"
	"os"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
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
func objectsOf(st fileState) []string {
	var out []string
	for _, s := range st.services {
		out = append(out, "Service "+s.Namespace+"/"+s.Name)
	}
	for _, s := range st.slices {
		out = append(out, "EndpointSlice "+s.Namespace+"/"+s.Name)
	}
	if st.node != nil {
		out = append(out, "Node "+st.node.Name)
	}
	for _, c := range st.serviceCIDRs {
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
	assertLines(t, "objects", objectsOf(res.state), []string{
		"Service default/web", "Service kube-system/dns-udp", "Service default/db",
		"EndpointSlice default/web-7xk2p", "EndpointSlice kube-system/dns-udp-q9v4t", "EndpointSlice default/db-h2k8d",
		"Node node-a",
	})
	dns := res.state.services[1]
	if p := dns.Spec.Ports[0]; dns.Spec.Type != v1.ServiceTypeNodePort || p.Protocol != v1.ProtocolUDP || p.NodePort != 30053 || p.TargetPort != intstr.FromInt32(5353) {
		t.Errorf("dns-udp decoded as %+v", dns.Spec)
	}
	if n := len(res.state.slices[0].Endpoints); n != 3 {
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
	assertLines(t, "objects", objectsOf(res.state), []string{"Service default/good", "EndpointSlice default/good-abc"})
	if got := res.issues[0].Error(); !strings.HasPrefix(got, "malformed.yaml: document 2 (line 10): unsupported kind") {
		t.Errorf("issue text = %q", got)
	}
	if got := res.issues[3].Error(); !strings.Contains(got, "EndpointSlice default/orphan") {
		t.Errorf("issue does not name the object: %q", got)
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
		check      func(t *testing.T, st fileState)
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
			name:       "JSON syntax error keeps the documents before it",
			in:         svcA + "\n" + `{"apiVersion": "v1", "kind":` + "\n" + svcB,
			wantObjs:   []string{"Service ns/a"},
			wantIssues: []string{"doc 2 line 2 item 0: invalid JSON, the rest of the stream is skipped"},
		},
		{
			name:     "issues come in document order, the syntax error last",
			in:       `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}` + "\n" + svcA + "\n{oops",
			wantObjs: []string{"Service ns/a"},
			wantIssues: []string{
				"doc 1 line 1 item 0: unsupported kind v1 Pod",
				"doc 3 line 3 item 0: invalid JSON",
			},
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
			check: func(t *testing.T, st fileState) {
				if ip := st.services[0].Spec.ClusterIP; ip != "10.96.0.9" {
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
			assertLines(t, "objects", objectsOf(res.state), tc.wantObjs)
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
	svc := res.state.services[0]
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
		{"slice namespace", res.state.slices[0].Namespace, "default"},
		{"slice port protocol", *res.state.slices[0].Ports[0].Protocol, v1.ProtocolTCP},
		{"slice port name", *res.state.slices[0].Ports[0].Name, ""},
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
	assertLines(t, "docs", got, []string{`1@1:"a: 1\n"`, `2@3:"\n\nb: 2\n"`, `3@6:"c: 3\n"`})
}
