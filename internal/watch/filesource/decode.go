package filesource

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strconv"
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
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/watch"
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
	state  watch.State
	issues []DecodeIssue
	// syntax is set when the stream does not parse (YAML or JSON syntax error, or a document
	// that is not an object): the whole revision must be rejected, nothing of it is usable.
	syntax *DecodeIssue
	// content is set when the file holds something: a non-blank YAML document or any JSON
	// (an explicit empty list, "[]" or a List with no items, is content: "no objects").
	content bool
	// usable counts the objects that were decoded and kept or deliberately ignored (another
	// node's Node).
	usable int
}

// revisionError returns why the revision must not be applied at all, or nil. A file with no
// content is a revision not yet written (a file truncated by an in-place rewrite looks like
// that), not "no Services"; a revision of which not one object is usable is rejected too,
// since applying it would remove every Service over what is most likely a mistake.
func (r *decodeResult) revisionError(file string) error {
	switch {
	case r.syntax != nil:
		return fmt.Errorf("%w: %w", errSyntax, *r.syntax)
	case !r.content:
		return fmt.Errorf("%w: %s has no documents (an explicit empty list, e.g. \"kind: List\" with \"items: []\", or [] in JSON, means no Services)", errEmptyRevision, file)
	case r.usable == 0 && len(r.issues) > 0:
		return fmt.Errorf("%w: %s: none of its objects is usable, first: %w", errNothingUsable, file, r.issues[0])
	}
	return nil
}

// Reasons a revision is rejected whole.
var (
	errSyntax        = errors.New("source file does not parse")
	errEmptyRevision = errors.New("source file is empty")
	errNothingUsable = errors.New("source file has no usable object")
)

// decode parses a whole file. nodeName selects the Node object to keep (others are ignored).
//
// Syntax errors are fatal to the revision (decodeResult.syntax): a stream that does not
// parse is most likely being written or broken, and none of it is applied. An object that
// parses but is wrong (unknown kind or field, missing name, wrong apiVersion...) is only
// skipped, with an issue naming it; the rest of the revision applies.
func (d *decoder) decode(file string, data []byte, nodeName string) decodeResult {
	var res decodeResult
	issue := func(p position, object string, err error) {
		res.issues = append(res.issues, DecodeIssue{File: file, Document: p.doc, Line: p.line, Item: p.item, Object: object, Err: err})
	}
	docs, isJSON, splitErr := splitDocuments(data)
	if splitErr != nil {
		var se *streamError
		if errors.As(splitErr, &se) {
			res.syntax = &DecodeIssue{File: file, Document: se.doc, Line: se.line, Err: se.err}
		} else {
			res.syntax = &DecodeIssue{File: file, Document: 1, Line: 1, Err: splitErr}
		}
		return res
	}
	res.content = isJSON

	c := collector{nodeName: nodeName, seen: make(map[string]position), issue: issue}
	for _, doc := range docs {
		if !isJSON && isBlankDocument(doc.data) {
			continue
		}
		res.content = true
		p := position{doc: doc.index, line: doc.line}
		js, serr := objectJSON(doc, isJSON)
		if serr != nil {
			res.syntax = &DecodeIssue{File: file, Document: doc.index, Line: serr.line, Err: serr.err}
			return res
		}
		if items, isList := d.typedListItems(js); isList {
			for i, it := range items {
				ip := p
				ip.item = i + 1
				if it.err != nil {
					issue(ip, it.name, it.err)
					continue
				}
				c.add(ip, it.obj)
			}
			continue
		}
		obj, err := d.decodeOne(doc.data, nil)
		if err != nil {
			issue(p, nameOf(js, nil), err)
			continue
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
				issue(ip, it.name, it.err)
				continue
			}
			if isListObject(it.obj) {
				issue(ip, "", errors.New("lists inside lists are not supported"))
				continue
			}
			c.add(ip, it.obj)
		}
	}
	res.state = c.state()
	res.usable = c.usable
	return res
}

// docSyntaxError is a document that does not parse, at an absolute line of the file.
type docSyntaxError struct {
	line int
	err  error
}

// yamlSyntaxError is the YAML parser's error with its line made absolute.
type yamlSyntaxError struct {
	msg string
	err error
}

func (e *yamlSyntaxError) Error() string { return e.msg }
func (e *yamlSyntaxError) Unwrap() error { return e.err }

// yamlErrLine finds the document-relative line in a YAML parser error ("yaml: line 3: ...")
// and returns the message with that line made absolute (the document starts at docLine).
func yamlErrLine(msg string, docLine int) (string, int) {
	const key = "line "
	i := strings.Index(msg, key)
	if i < 0 {
		return msg, docLine
	}
	rest := msg[i+len(key):]
	j := 0
	for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
		j++
	}
	n, err := strconv.Atoi(rest[:j])
	if err != nil || n < 1 || !strings.HasPrefix(rest[j:], ":") {
		return msg, docLine
	}
	line := docLine + n - 1
	return msg[:i] + key + strconv.Itoa(line) + rest[j:], line
}

// objectJSON checks that a non-blank document parses and is an object (a mapping), and
// returns it as JSON. Anything else is a syntax error: a scalar or a sequence at the top of a
// document is what a truncated file or a stray paste looks like, not an object to skip.
func objectJSON(doc document, isJSON bool) ([]byte, *docSyntaxError) {
	js := doc.data
	if !isJSON {
		var err error
		js, err = sigsyaml.YAMLToJSON(doc.data)
		if err != nil {
			msg, line := yamlErrLine(strings.TrimPrefix(err.Error(), "error converting YAML to JSON: "), doc.line)
			return nil, &docSyntaxError{line: line, err: &yamlSyntaxError{msg: "invalid YAML: " + msg, err: err}}
		}
	}
	if t := bytes.TrimLeft(js, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		what := "a scalar"
		switch {
		case len(t) > 0 && t[0] == '[':
			what = "a list"
		case bytes.Equal(t, []byte("null")):
			what = "null"
		}
		return nil, &docSyntaxError{line: doc.line, err: fmt.Errorf("the document is %s, not an object", what)}
	}
	return js, nil
}

// decodeOne decodes one non-blank document or list item. defaults fills a missing
// apiVersion or kind (items of typed lists usually omit them).
func (d *decoder) decodeOne(data []byte, defaults *schema.GroupVersionKind) (runtime.Object, error) {
	obj, gvk, err := d.deser.Decode(data, defaults, nil)
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
	obj  runtime.Object
	err  error
	name string // of an item that could not be decoded, when its metadata tells
}

// nameOf names an object that could not be decoded ("Service ns/name"), from its kind (or
// the default one) and metadata, or returns "" when those cannot be read either.
func nameOf(js []byte, defaults *schema.GroupVersionKind) string {
	var o struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	if json.Unmarshal(js, &o) != nil {
		return ""
	}
	kind, name, ns := o.Kind, o.Metadata.Name, o.Metadata.Namespace
	if kind == "" && defaults != nil {
		kind = defaults.Kind
	}
	if kind == "" || name == "" {
		return ""
	}
	if ns == "" && (kind == "Service" || kind == "EndpointSlice") {
		ns = metav1.NamespaceDefault
	}
	if ns == "" {
		return kind + " " + name
	}
	return kind + " " + ns + "/" + name
}

// listItems returns the items of a v1 List; isList is false for anything else.
func (d *decoder) listItems(obj runtime.Object) (items []listItem, isList bool) {
	l, ok := obj.(*v1.List)
	if !ok {
		return nil, false
	}
	for _, raw := range l.Items {
		if raw.Object != nil {
			items = append(items, listItem{obj: raw.Object})
			continue
		}
		if isBlankDocument(raw.Raw) || bytes.Equal(bytes.TrimSpace(raw.Raw), []byte("null")) {
			items = append(items, listItem{err: errors.New("empty list item")})
			continue
		}
		o, err := d.decodeOne(raw.Raw, nil)
		it := listItem{obj: o, err: err}
		if err != nil {
			it.name = nameOf(raw.Raw, nil)
		}
		items = append(items, it)
	}
	return items, true
}

// typedListItemKind returns the item kind of a typed list of a supported kind.
func typedListItemKind(list schema.GroupVersionKind) (schema.GroupVersionKind, bool) {
	switch list {
	case v1.SchemeGroupVersion.WithKind("ServiceList"):
		return v1.SchemeGroupVersion.WithKind("Service"), true
	case v1.SchemeGroupVersion.WithKind("NodeList"):
		return v1.SchemeGroupVersion.WithKind("Node"), true
	case discoveryv1.SchemeGroupVersion.WithKind("EndpointSliceList"):
		return discoveryv1.SchemeGroupVersion.WithKind("EndpointSlice"), true
	case networkingv1.SchemeGroupVersion.WithKind("ServiceCIDRList"):
		return networkingv1.SchemeGroupVersion.WithKind("ServiceCIDR"), true
	}
	return schema.GroupVersionKind{}, false
}

// typedListItems decodes the items of a typed list (ServiceList...) one by one, so that one
// bad item is skipped alone instead of failing the whole list. isList is false when js is
// not a typed list of a supported kind.
func (d *decoder) typedListItems(js []byte) (items []listItem, isList bool) {
	var tm metav1.TypeMeta
	if json.Unmarshal(js, &tm) != nil {
		return nil, false // let the deserializer report it
	}
	listGVK := tm.GroupVersionKind()
	itemGVK, ok := typedListItemKind(listGVK)
	if !ok {
		return nil, false
	}
	var l struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(js, &l); err != nil {
		return []listItem{{err: fmt.Errorf("%s: items: %w", describeGVK(&listGVK), err)}}, true
	}
	for _, raw := range l.Items {
		if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			items = append(items, listItem{err: errors.New("empty list item")})
			continue
		}
		o, err := d.decodeOne(raw, &itemGVK)
		if err == nil && isListObject(o) {
			err = errors.New("lists inside lists are not supported")
		}
		it := listItem{obj: o, err: err}
		if err != nil {
			it.name = nameOf(raw, &itemGVK)
		}
		items = append(items, it)
	}
	return items, true
}

// isListObject reports whether obj is a list of any supported kind.
func isListObject(obj runtime.Object) bool {
	switch obj.(type) {
	case *v1.List, *v1.ServiceList, *discoveryv1.EndpointSliceList, *v1.NodeList, *networkingv1.ServiceCIDRList:
		return true
	}
	return false
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
	usable   int      // objects accepted (or deliberately ignored: another node's Node)
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
		c.usable++
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
		c.usable++
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
		c.usable++
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
		c.usable++
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

func (c *collector) state() watch.State {
	var st watch.State
	for _, k := range c.order {
		if svc, ok := c.services[k]; ok {
			st.Services = append(st.Services, svc)
		}
		if sl, ok := c.slices[k]; ok {
			st.Slices = append(st.Slices, sl)
		}
		if sc, ok := c.cidrs[k]; ok {
			st.ServiceCIDRs = append(st.ServiceCIDRs, sc)
		}
	}
	st.Node = c.node
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
			a, ok := inet.ParseAddrSloppy(s) // as the proxy reads it
			if !ok {
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
// is '{' or '[' (isJSON), else YAML documents separated by "---" lines. A JSON syntax error
// is returned as a *streamError.
func splitDocuments(data []byte) (docs []document, isJSON bool, err error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")) // UTF-8 BOM
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[') {
		docs, err := splitJSON(data)
		return docs, true, err
	}
	return splitYAML(data), false, nil
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
	// Offsets only grow, so the line count goes on from the last one: counting from the
	// start each time made a stream of many small documents quadratic (20 s of a 10,000-
	// Service file's load under TCG).
	var lineOff int64
	line := 1
	lineAt := func(off int64) int {
		if off > lineOff {
			line += bytes.Count(data[lineOff:off], []byte("\n"))
			lineOff = off
		}
		return line
	}
	for {
		off := skipSpace(data, dec.InputOffset())
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if err == io.EOF {
			return docs, nil
		}
		if err != nil {
			return docs, &streamError{doc: index, line: lineAt(off), err: fmt.Errorf("invalid JSON: %w", err)}
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
					return docs, &streamError{doc: index, line: lineAt(eoff), err: fmt.Errorf("invalid JSON: %w", err)}
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
