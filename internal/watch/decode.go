package watch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// DecodeIssue describes one object of a source file that was skipped (or, for duplicates,
// replaced by a later one).
type DecodeIssue struct {
	File string
	// Document is the 1-based position of the document in the stream: YAML documents are
	// separated by "---" lines; in JSON every top-level value (or element of a top-level
	// array) is a document.
	Document int
	// Line is the 1-based line on which the document starts.
	Line int
	// Item is the 1-based index inside a List document, 0 when not in a list.
	Item int
	// Object names the object when it could be decoded far enough, e.g. "Service default/web".
	Object string
	Err    error
}

func (i DecodeIssue) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: document %d (line %d)", i.File, i.Document, i.Line)
	if i.Item > 0 {
		fmt.Fprintf(&b, " item %d", i.Item)
	}
	if i.Object != "" {
		fmt.Fprintf(&b, ": %s", i.Object)
	}
	fmt.Fprintf(&b, ": %v", i.Err)
	return b.String()
}

func (i DecodeIssue) Unwrap() error { return i.Err }

// decoder turns a file's bytes into the objects the file source understands.
type decoder struct {
	deser runtime.Decoder
}

func newDecoder() (*decoder, error) {
	sch := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{v1.AddToScheme, discoveryv1.AddToScheme, networkingv1.AddToScheme} {
		if err := add(sch); err != nil {
			return nil, fmt.Errorf("building the source file scheme: %w", err)
		}
	}
	// Strict: unknown and duplicate fields are errors, so a typo in a hand-written file is
	// reported instead of silently changing what is proxied.
	codecs := serializer.NewCodecFactory(sch, serializer.EnableStrict)
	return &decoder{deser: codecs.UniversalDeserializer()}, nil
}

// document is one raw document of the stream.
type document struct {
	index int // 1-based
	line  int // 1-based
	data  []byte
}

// position locates an object for issues and duplicate detection.
type position struct {
	doc, line, item int
}

type decodeResult struct {
	state  fileState
	issues []DecodeIssue
}

// decode parses a whole file. nodeName selects the Node object to keep (others are ignored).
func (d *decoder) decode(file string, data []byte, nodeName string) decodeResult {
	var res decodeResult
	issue := func(p position, object string, err error) {
		res.issues = append(res.issues, DecodeIssue{File: file, Document: p.doc, Line: p.line, Item: p.item, Object: object, Err: err})
	}
	docs, splitErr := splitDocuments(data)

	c := collector{nodeName: nodeName, seen: make(map[string]position), issue: issue}
	for _, doc := range docs {
		p := position{doc: doc.index, line: doc.line}
		obj, err := d.decodeOne(doc.data)
		if err != nil {
			issue(p, "", err)
			continue
		}
		if obj == nil {
			continue // empty document
		}
		items, isList := d.listItems(obj)
		if !isList {
			c.add(p, obj)
			continue
		}
		for i, it := range items {
			ip := p
			ip.item = i + 1
			if it.err != nil {
				issue(ip, "", it.err)
				continue
			}
			if _, nested := d.listItemsShallow(it.obj); nested {
				issue(ip, "", errors.New("lists inside lists are not supported"))
				continue
			}
			c.add(ip, it.obj)
		}
	}
	if splitErr != nil { // it ends the stream: report it last, in document order
		var se *streamError
		if errors.As(splitErr, &se) {
			issue(position{doc: se.doc, line: se.line}, "", se.err)
		} else {
			issue(position{doc: 1, line: 1}, "", splitErr)
		}
	}
	res.state = c.state()
	return res
}

// decodeOne decodes one document; (nil, nil) means the document is empty.
func (d *decoder) decodeOne(data []byte) (runtime.Object, error) {
	if isBlankDocument(data) {
		return nil, nil
	}
	obj, gvk, err := d.deser.Decode(data, nil, nil)
	switch {
	case err == nil:
		return obj, nil
	case runtime.IsMissingKind(err):
		return nil, errors.New("missing kind")
	case runtime.IsMissingVersion(err):
		return nil, errors.New("missing apiVersion")
	case runtime.IsNotRegisteredError(err):
		if gvk == nil || gvk.Kind == "" {
			var tm metav1.TypeMeta
			if yaml.Unmarshal(data, &tm) == nil {
				g := tm.GroupVersionKind()
				gvk = &g
			}
		}
		return nil, unsupportedKind(gvk)
	case runtime.IsStrictDecodingError(err):
		return nil, fmt.Errorf("%s: %w", describeGVK(gvk), err)
	default:
		return nil, fmt.Errorf("decoding: %w", err)
	}
}

type listItem struct {
	obj runtime.Object
	err error
}

// listItems returns the items of a list object (v1 List or a typed list of a supported
// kind); isList is false for anything else.
func (d *decoder) listItems(obj runtime.Object) (items []listItem, isList bool) {
	if l, ok := obj.(*v1.List); ok {
		for _, raw := range l.Items {
			if raw.Object != nil {
				items = append(items, listItem{obj: raw.Object})
				continue
			}
			o, err := d.decodeOne(raw.Raw)
			if err == nil && o == nil {
				err = errors.New("empty list item")
			}
			items = append(items, listItem{obj: o, err: err})
		}
		return items, true
	}
	return d.listItemsShallow(obj)
}

// listItemsShallow handles the typed lists of the supported kinds.
func (d *decoder) listItemsShallow(obj runtime.Object) (items []listItem, isList bool) {
	switch l := obj.(type) {
	case *v1.List:
		return nil, true
	case *v1.ServiceList:
		for i := range l.Items {
			items = append(items, listItem{obj: &l.Items[i]})
		}
	case *discoveryv1.EndpointSliceList:
		for i := range l.Items {
			items = append(items, listItem{obj: &l.Items[i]})
		}
	case *v1.NodeList:
		for i := range l.Items {
			items = append(items, listItem{obj: &l.Items[i]})
		}
	case *networkingv1.ServiceCIDRList:
		for i := range l.Items {
			items = append(items, listItem{obj: &l.Items[i]})
		}
	default:
		return nil, false
	}
	return items, true
}

// collector validates, defaults and de-duplicates decoded objects.
type collector struct {
	nodeName string
	seen     map[string]position // "Kind ns/name" -> where it was first seen
	issue    func(p position, object string, err error)

	services map[string]*v1.Service
	slices   map[string]*discoveryv1.EndpointSlice
	cidrs    map[string]*networkingv1.ServiceCIDR
	node     *v1.Node
	order    []string // first-seen order of the keys above, for a stable result
}

func (c *collector) add(p position, obj runtime.Object) {
	switch o := obj.(type) {
	case *v1.Service:
		o = o.DeepCopy()
		if o.Namespace == "" {
			o.Namespace = metav1.NamespaceDefault
		}
		name := "Service " + o.Namespace + "/" + o.Name
		if o.Name == "" {
			c.issue(p, "Service", errors.New("metadata.name is required"))
			return
		}
		defaultService(o)
		c.dedup(p, name)
		if c.services == nil {
			c.services = make(map[string]*v1.Service)
		}
		c.services[name] = o
	case *discoveryv1.EndpointSlice:
		o = o.DeepCopy()
		if o.Namespace == "" {
			o.Namespace = metav1.NamespaceDefault
		}
		name := "EndpointSlice " + o.Namespace + "/" + o.Name
		switch {
		case o.Name == "":
			c.issue(p, "EndpointSlice", errors.New("metadata.name is required"))
			return
		case o.Labels[discoveryv1.LabelServiceName] == "":
			c.issue(p, name, fmt.Errorf("label %s is required: it names the slice's Service", discoveryv1.LabelServiceName))
			return
		case o.AddressType == "":
			c.issue(p, name, errors.New("addressType is required (IPv4, IPv6 or FQDN)"))
			return
		}
		defaultSlice(o)
		c.dedup(p, name)
		if c.slices == nil {
			c.slices = make(map[string]*discoveryv1.EndpointSlice)
		}
		c.slices[name] = o
	case *v1.Node:
		if o.Name == "" {
			c.issue(p, "Node", errors.New("metadata.name is required"))
			return
		}
		if c.nodeName == "" || o.Name != c.nodeName {
			return // another node's object: not ours to use
		}
		c.dedup(p, "Node "+o.Name)
		c.node = o.DeepCopy()
	case *networkingv1.ServiceCIDR:
		if o.Name == "" {
			c.issue(p, "ServiceCIDR", errors.New("metadata.name is required"))
			return
		}
		name := "ServiceCIDR " + o.Name
		for _, s := range o.Spec.CIDRs {
			if _, err := netip.ParsePrefix(s); err != nil {
				c.issue(p, name, fmt.Errorf("spec.cidrs: %q: %w", s, err))
				return
			}
		}
		c.dedup(p, name)
		if c.cidrs == nil {
			c.cidrs = make(map[string]*networkingv1.ServiceCIDR)
		}
		c.cidrs[name] = o.DeepCopy()
	default:
		gvk := obj.GetObjectKind().GroupVersionKind()
		c.issue(p, "", unsupportedKind(&gvk))
	}
}

// dedup records the first position of name; a repeat is reported (the later object wins,
// as a sequence of applies would) and returns false.
func (c *collector) dedup(p position, name string) bool {
	if first, ok := c.seen[name]; ok {
		where := fmt.Sprintf("document %d", first.doc)
		if first.item > 0 {
			where += fmt.Sprintf(" item %d", first.item)
		}
		c.issue(p, name, fmt.Errorf("duplicate of %s; this later one is used", where))
		return false
	}
	c.seen[name] = p
	c.order = append(c.order, name)
	return true
}

func (c *collector) state() fileState {
	var st fileState
	for _, k := range c.order {
		if svc, ok := c.services[k]; ok {
			st.services = append(st.services, svc)
		}
		if sl, ok := c.slices[k]; ok {
			st.slices = append(st.slices, sl)
		}
		if sc, ok := c.cidrs[k]; ok {
			st.serviceCIDRs = append(st.serviceCIDRs, sc)
		}
	}
	st.node = c.node
	return st
}

func describeGVK(gvk *schema.GroupVersionKind) string {
	if gvk == nil || gvk.Kind == "" {
		return "object"
	}
	return strings.TrimPrefix(gvk.GroupVersion().String()+" "+gvk.Kind, "/")
}

func unsupportedKind(gvk *schema.GroupVersionKind) error {
	return fmt.Errorf("unsupported kind %s (supported: v1 Service, discovery.k8s.io/v1 EndpointSlice, v1 Node, networking.k8s.io/v1 ServiceCIDR, and v1 List or typed lists of them)", describeGVK(gvk))
}

// defaultService fills the fields the apiserver would default, so that objects written by
// hand look like objects read from the API.
func defaultService(svc *v1.Service) {
	sp := &svc.Spec
	if sp.Type == "" {
		sp.Type = v1.ServiceTypeClusterIP
	}
	if sp.SessionAffinity == "" {
		sp.SessionAffinity = v1.ServiceAffinityNone
	}
	switch sp.SessionAffinity {
	case v1.ServiceAffinityNone:
		sp.SessionAffinityConfig = nil
	case v1.ServiceAffinityClientIP:
		if sp.SessionAffinityConfig == nil || sp.SessionAffinityConfig.ClientIP == nil || sp.SessionAffinityConfig.ClientIP.TimeoutSeconds == nil {
			t := v1.DefaultClientIPServiceAffinitySeconds
			sp.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: &t}}
		}
	}
	for i := range sp.Ports {
		p := &sp.Ports[i]
		if p.Protocol == "" {
			p.Protocol = v1.ProtocolTCP
		}
		if p.TargetPort == intstr.FromInt32(0) || p.TargetPort == intstr.FromString("") {
			p.TargetPort = intstr.FromInt32(p.Port)
		}
	}
	if sp.ClusterIP == "" && len(sp.ClusterIPs) > 0 {
		sp.ClusterIP = sp.ClusterIPs[0]
	}
	if len(sp.ClusterIPs) == 0 && sp.ClusterIP != "" {
		sp.ClusterIPs = []string{sp.ClusterIP}
	}
	if len(sp.IPFamilies) == 0 && sp.ClusterIP != v1.ClusterIPNone {
		for _, s := range sp.ClusterIPs {
			a, err := netip.ParseAddr(s)
			if err != nil {
				sp.IPFamilies = nil
				break
			}
			if a.Unmap().Is4() {
				sp.IPFamilies = append(sp.IPFamilies, v1.IPv4Protocol)
			} else {
				sp.IPFamilies = append(sp.IPFamilies, v1.IPv6Protocol)
			}
		}
	}
	if sp.IPFamilyPolicy == nil && sp.ClusterIP != "" && sp.ClusterIP != v1.ClusterIPNone {
		pol := v1.IPFamilyPolicySingleStack
		if len(sp.ClusterIPs) > 1 {
			pol = v1.IPFamilyPolicyRequireDualStack
		}
		sp.IPFamilyPolicy = &pol
	}
	external := sp.Type == v1.ServiceTypeNodePort || sp.Type == v1.ServiceTypeLoadBalancer || len(sp.ExternalIPs) > 0
	if external && sp.ExternalTrafficPolicy == "" {
		sp.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyCluster
	}
	if sp.InternalTrafficPolicy == nil && (sp.Type == v1.ServiceTypeClusterIP || sp.Type == v1.ServiceTypeNodePort || sp.Type == v1.ServiceTypeLoadBalancer) {
		itp := v1.ServiceInternalTrafficPolicyCluster
		sp.InternalTrafficPolicy = &itp
	}
	if sp.Type == v1.ServiceTypeLoadBalancer {
		if sp.AllocateLoadBalancerNodePorts == nil {
			t := true
			sp.AllocateLoadBalancerNodePorts = &t
		}
		for i := range svc.Status.LoadBalancer.Ingress {
			ing := &svc.Status.LoadBalancer.Ingress[i]
			if ing.IP != "" && ing.IPMode == nil {
				m := v1.LoadBalancerIPModeVIP
				ing.IPMode = &m
			}
		}
	}
}

// defaultSlice fills the port fields the apiserver would default.
func defaultSlice(slice *discoveryv1.EndpointSlice) {
	for i := range slice.Ports {
		p := &slice.Ports[i]
		if p.Name == nil {
			n := ""
			p.Name = &n
		}
		if p.Protocol == nil {
			proto := v1.ProtocolTCP
			p.Protocol = &proto
		}
	}
}

// ---- splitting a stream into documents ----

// streamError is a syntax error that ends the stream at a given document.
type streamError struct {
	doc, line int
	err       error
}

func (e *streamError) Error() string {
	return fmt.Sprintf("document %d (line %d): %v", e.doc, e.line, e.err)
}

func (e *streamError) Unwrap() error { return e.err }

// splitDocuments cuts data into documents: a JSON stream when the first significant byte
// is '{' or '[', else YAML documents separated by "---" lines. The documents before a
// JSON syntax error are returned along with a *streamError.
func splitDocuments(data []byte) ([]document, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")) // UTF-8 BOM
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[') {
		return splitJSON(data)
	}
	return splitYAML(data), nil
}

func splitYAML(data []byte) []document {
	var (
		docs  []document
		cur   bytes.Buffer
		start = 1 // line the current document starts on
		index = 1
		line  = 0
		has   = false // the current document has at least one line
	)
	flush := func() {
		if has {
			docs = append(docs, document{index: index, line: start, data: bytes.Clone(cur.Bytes())})
			index++
		}
		cur.Reset()
		has = false
	}
	for len(data) > 0 {
		var l []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			l, data = data[:i+1], data[i+1:]
		} else {
			l, data = data, nil
		}
		line++
		content := bytes.TrimRight(l, "\r\n")
		if isSeparator(content) {
			flush()
			start = line + 1
			rest := bytes.TrimSpace(content[3:])
			if len(rest) > 0 && rest[0] != '#' {
				// "--- value": the value belongs to the new document.
				start = line
				cur.Write(rest)
				cur.WriteByte('\n')
				has = true
			}
			continue
		}
		if !has {
			start = line
		}
		cur.Write(l)
		has = true
	}
	flush()
	return docs
}

func isSeparator(line []byte) bool {
	if !bytes.HasPrefix(line, []byte("---")) {
		return false
	}
	return len(line) == 3 || line[3] == ' ' || line[3] == '\t'
}

// isBlankDocument reports whether a YAML document holds only blank lines, comments and
// document-end markers.
func isBlankDocument(data []byte) bool {
	for l := range bytes.Lines(data) {
		t := bytes.TrimSpace(l)
		if len(t) != 0 && t[0] != '#' && !bytes.Equal(t, []byte("...")) {
			return false
		}
	}
	return true
}

func splitJSON(data []byte) ([]document, error) {
	var docs []document
	dec := json.NewDecoder(bytes.NewReader(data))
	index := 1
	lineAt := func(off int64) int { return bytes.Count(data[:off], []byte("\n")) + 1 }
	for {
		off := skipSpace(data, dec.InputOffset())
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if err == io.EOF {
			return docs, nil
		}
		if err != nil {
			return docs, &streamError{doc: index, line: lineAt(off), err: fmt.Errorf("invalid JSON, the rest of the stream is skipped: %w", err)}
		}
		if len(raw) > 0 && raw[0] == '[' {
			// A top-level array: every element is a document.
			sd := json.NewDecoder(bytes.NewReader(raw))
			if _, err := sd.Token(); err != nil { // '['
				return docs, &streamError{doc: index, line: lineAt(off), err: fmt.Errorf("invalid JSON array: %w", err)}
			}
			for sd.More() {
				eoff := off + skipSpace(raw, sd.InputOffset())
				var e json.RawMessage
				if err := sd.Decode(&e); err != nil {
					return docs, &streamError{doc: index, line: lineAt(eoff), err: fmt.Errorf("invalid JSON, the rest of the stream is skipped: %w", err)}
				}
				docs = append(docs, document{index: index, line: lineAt(eoff), data: e})
				index++
			}
			continue
		}
		docs = append(docs, document{index: index, line: lineAt(off), data: raw})
		index++
	}
}

func skipSpace(data []byte, off int64) int64 {
	for off < int64(len(data)) {
		switch data[off] {
		case ' ', '\t', '\r', '\n', ',':
			off++
		default:
			return off
		}
	}
	return off
}
