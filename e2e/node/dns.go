package node

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/kipvs/kipvs/internal/testutil/poll"
)

// corednsYAML is kube-dns as kubeadm v1.34 deploys it, less the forwarding (the file says why).
//
//go:embed manifests/coredns.yaml
var corednsYAML []byte

// CorednsImage is the image manifests/coredns.yaml names: kubeadm v1.34.10's CoreDNS
// (make image-coredns builds it under this name).
const CorednsImage = "registry.k8s.io/coredns/coredns:v1.12.1"

// The steps a run has only when Config.CorednsImage is set.
const (
	stepKubeDNS = "kube-dns Ready"
	stepDNS     = "DNS answers"
)

// dnsName is what the DNS check resolves: the `kubernetes` Service, at serviceIP.
const dnsName = "kubernetes.default.svc.cluster.local"

// outsideName is a name outside the cluster (.invalid is reserved, RFC 2606).
const outsideName = "kipvs-dns-check.invalid"

// kubeDNS is manifests/coredns.yaml, parsed.
type kubeDNS struct {
	ServiceAccount     *corev1.ServiceAccount
	ClusterRole        *rbacv1.ClusterRole
	ClusterRoleBinding *rbacv1.ClusterRoleBinding
	ConfigMap          *corev1.ConfigMap
	Deployment         *appsv1.Deployment
	Service            *corev1.Service
}

// parseKubeDNS reads the six objects of kube-dns from a multi-document YAML, strictly (an
// unknown field is an error), and checks that they fit together (validate).
func parseKubeDNS(b []byte) (*kubeDNS, error) {
	var k kubeDNS
	rd := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	for i := 0; ; i++ {
		doc, err := rd.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		var tm struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		var into any
		switch tm.Kind {
		case "":
			if len(bytes.TrimSpace(stripComments(doc))) == 0 {
				continue
			}
			return nil, fmt.Errorf("document %d has no kind", i)
		case "ServiceAccount":
			into = setOnce(&k.ServiceAccount)
		case "ClusterRole":
			into = setOnce(&k.ClusterRole)
		case "ClusterRoleBinding":
			into = setOnce(&k.ClusterRoleBinding)
		case "ConfigMap":
			into = setOnce(&k.ConfigMap)
		case "Deployment":
			into = setOnce(&k.Deployment)
		case "Service":
			into = setOnce(&k.Service)
		default:
			return nil, fmt.Errorf("document %d: unexpected kind %s", i, tm.Kind)
		}
		if into == nil {
			return nil, fmt.Errorf("document %d: a second %s", i, tm.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, into); err != nil {
			return nil, fmt.Errorf("document %d (%s): %w", i, tm.Kind, err)
		}
	}
	return &k, k.validate()
}

// setOnce allocates *p and returns it, or returns nil when *p is already set.
func setOnce[T any](p **T) any {
	if *p != nil {
		return nil
	}
	*p = new(T)
	return *p
}

func stripComments(doc []byte) []byte {
	var out bytes.Buffer
	for _, l := range bytes.Split(doc, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(l), []byte("#")) {
			out.Write(l)
			out.WriteByte('\n')
		}
	}
	return out.Bytes()
}

// validate checks what ties the objects together and what the node and the DNS tests rely on:
// the Service at ClusterDNS with kubeadm's ports, selecting the Deployment's pods by
// k8s-app=kube-dns, which run as the ServiceAccount the ClusterRoleBinding binds, with the
// ConfigMap's Corefile.
func (k *kubeDNS) validate() error {
	for _, o := range []struct {
		kind    string
		missing bool
	}{
		{"ServiceAccount", k.ServiceAccount == nil}, {"ClusterRole", k.ClusterRole == nil},
		{"ClusterRoleBinding", k.ClusterRoleBinding == nil}, {"ConfigMap", k.ConfigMap == nil},
		{"Deployment", k.Deployment == nil}, {"Service", k.Service == nil},
	} {
		if o.missing {
			return fmt.Errorf("no %s", o.kind)
		}
	}
	svc, dep := k.Service, k.Deployment
	if svc.Name != "kube-dns" || svc.Namespace != "kube-system" {
		return fmt.Errorf("Service %s/%s: want kube-system/kube-dns", svc.Namespace, svc.Name)
	}
	if svc.Spec.ClusterIP != ClusterDNS {
		return fmt.Errorf("Service kube-dns: spec.clusterIP %q, want the kubelet's clusterDNS %s", svc.Spec.ClusterIP, ClusterDNS)
	}
	if err := checkDNSPorts(svc.Spec.Ports); err != nil {
		return fmt.Errorf("Service kube-dns: spec.ports: %w", err)
	}
	if svc.Labels["k8s-app"] != "kube-dns" || svc.Spec.Selector["k8s-app"] != "kube-dns" || len(svc.Spec.Selector) != 1 {
		return fmt.Errorf("Service kube-dns: labels %v, selector %v: want k8s-app=kube-dns for both", svc.Labels, svc.Spec.Selector)
	}
	tmpl := dep.Spec.Template
	for key, val := range svc.Spec.Selector {
		if tmpl.Labels[key] != val || dep.Spec.Selector.MatchLabels[key] != val {
			return fmt.Errorf("Deployment %s: spec.selector %v / pod labels %v do not carry the Service's selector %s=%s",
				dep.Name, dep.Spec.Selector.MatchLabels, tmpl.Labels, key, val)
		}
	}
	if dep.Namespace != "kube-system" || tmpl.Spec.ServiceAccountName != k.ServiceAccount.Name || k.ServiceAccount.Namespace != dep.Namespace {
		return fmt.Errorf("Deployment %s/%s: serviceAccountName %q, want ServiceAccount %s/%s in kube-system",
			dep.Namespace, dep.Name, tmpl.Spec.ServiceAccountName, k.ServiceAccount.Namespace, k.ServiceAccount.Name)
	}
	b := k.ClusterRoleBinding
	if b.RoleRef.Kind != "ClusterRole" || b.RoleRef.Name != k.ClusterRole.Name || len(b.Subjects) != 1 ||
		b.Subjects[0].Kind != "ServiceAccount" || b.Subjects[0].Name != k.ServiceAccount.Name || b.Subjects[0].Namespace != k.ServiceAccount.Namespace {
		return fmt.Errorf("ClusterRoleBinding %s: roleRef %v, subjects %v: want ClusterRole %s for ServiceAccount %s/%s",
			b.Name, b.RoleRef, b.Subjects, k.ClusterRole.Name, k.ServiceAccount.Namespace, k.ServiceAccount.Name)
	}
	if len(tmpl.Spec.Containers) != 1 {
		return fmt.Errorf("Deployment coredns: %d containers, want 1", len(tmpl.Spec.Containers))
	}
	var cmVolume bool
	for _, v := range tmpl.Spec.Volumes {
		if v.ConfigMap != nil && v.ConfigMap.Name == k.ConfigMap.Name {
			cmVolume = true
		}
	}
	if _, ok := k.ConfigMap.Data["Corefile"]; !ok || !cmVolume {
		return fmt.Errorf("ConfigMap %s: want a Corefile, mounted by the Deployment", k.ConfigMap.Name)
	}
	return nil
}

// checkDNSPorts wants kubeadm's three ports: dns 53/UDP, dns-tcp 53/TCP, metrics 9153/TCP.
func checkDNSPorts(ports []corev1.ServicePort) error {
	want := []string{"dns 53/UDP->53", "dns-tcp 53/TCP->53", "metrics 9153/TCP->9153"}
	var got []string
	for _, p := range ports {
		got = append(got, fmt.Sprintf("%s %d/%s->%s", p.Name, p.Port, p.Protocol, p.TargetPort.String()))
	}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		return fmt.Errorf("%s, want %s", strings.Join(got, ", "), strings.Join(want, ", "))
	}
	return nil
}

// kubeDNSManifests is manifests/coredns.yaml with image as the CoreDNS container's image
// (the file's own text otherwise), checked by parseKubeDNS.
func kubeDNSManifests(image string) ([]byte, error) {
	if !strings.Contains(image, ":") {
		return nil, fmt.Errorf("CoreDNS image %q has no tag", image)
	}
	line := []byte("image: " + CorednsImage + "\n")
	if n := bytes.Count(corednsYAML, line); n != 1 {
		return nil, fmt.Errorf("manifests/coredns.yaml holds %q %d times, want once", line, n)
	}
	out := bytes.Replace(corednsYAML, line, []byte("image: "+image+"\n"), 1)
	k, err := parseKubeDNS(out)
	if err != nil {
		return nil, fmt.Errorf("manifests/coredns.yaml: %w", err)
	}
	if got := k.Deployment.Spec.Template.Spec.Containers[0].Image; got != image {
		return nil, fmt.Errorf("manifests/coredns.yaml: the image became %q, want %q", got, image)
	}
	return out, nil
}

// wantStep reports whether the run has the step named: the kube-dns steps only with a CoreDNS image.
func (r *runner) wantStep(name string) bool {
	if name == stepKubeDNS || name == stepDNS {
		return r.cfg.CorednsImage != ""
	}
	return true
}

// deployKubeDNS applies kube-dns (manifests/coredns.yaml with Config.CorednsImage) and waits for
// its pod to be Ready: CoreDNS's /ready answers once its kubernetes plugin has listed Services,
// EndpointSlices and Namespaces from the apiserver, which it reaches at the `kubernetes`
// Service's ClusterIP, so through the proxy.
func (r *runner) deployKubeDNS(ctx context.Context) error {
	m, err := kubeDNSManifests(r.cfg.CorednsImage)
	if err != nil {
		return err
	}
	out, err := r.kubectlRun(ctx, time.Minute, m, "apply", "--server-side", "-f", "-")
	if err != nil {
		return err
	}
	r.logf("applied kube-dns (%s, Service %s):\n%s", r.cfg.CorednsImage, ClusterDNS, strings.TrimSpace(out))
	// CoreDNS is Ready once it has listed Services through the kubernetes Service, which
	// waits for the proxy's first sync: kube-proxy on two TCG nodes takes minutes.
	return r.waitPodsReady(ctx, 6*time.Minute, "kube-system", "k8s-app=kube-dns", 1)
}

// dnsCheck resolves the `kubernetes` Service's name from the smoke's client pod through the
// kube-dns ClusterIP (so through the proxy's IPVS) over UDP and over TCP, then by the pod's own
// resolv.conf and search list (the kubelet's clusterDNS), and wants serviceIP each time. A name
// outside the cluster must fail at once with SERVFAIL: the Corefile does not forward. The
// IPVS table is taken again afterwards, with CoreDNS's log.
func (r *runner) dnsCheck(ctx context.Context) error {
	server := ClusterDNS + ":53"
	queries := [][]string{
		{"-resolve", dnsName, "-dns-server", server, "-dns-net", "udp"},
		{"-resolve", dnsName, "-dns-server", server, "-dns-net", "tcp"},
		{"-resolve", "kubernetes.default"}, // resolv.conf: nameserver, search list, ndots
	}
	for _, q := range queries {
		args := append([]string{"exec", "client", "--", "/echo"}, q...)
		what := fmt.Sprintf("kubectl %s printing %s", strings.Join(args, " "), serviceIP)
		var line string
		_, err := poll.Wait(2*time.Minute, what, func() (bool, string) {
			out, err := r.kubectlRun(ctx, 20*time.Second, nil, args...)
			if err != nil {
				return false, err.Error()
			}
			line = strings.TrimSpace(out)
			f := strings.Fields(line)
			return len(f) >= 2 && f[1] == serviceIP.String(), line
		})
		if err != nil {
			return err
		}
		r.logf("DNS: %s", line)
	}
	// Go's resolver calls a SERVFAIL answer "server misbehaving"; a forwarding CoreDNS would
	// answer NXDOMAIN ("no such host") or time out.
	out, err := r.kubectlRun(ctx, 20*time.Second, nil, "exec", "client", "--", "/echo", "-resolve", outsideName, "-dns-net", "udp")
	if err == nil || !strings.Contains(out, "server misbehaving") {
		return fmt.Errorf("%s, outside the cluster, want SERVFAIL (no forward in the Corefile): %v: %s", outsideName, err, strings.TrimSpace(out))
	}
	r.logf("DNS: %s fails as it should: %s", outsideName, strings.TrimSpace(out))
	if out, err := r.kubectlRun(ctx, 30*time.Second, nil, "exec", "-n", "kube-system", "daemonset/kipvs", "--",
		"/usr/local/bin/kipvs", "status", "-Ln"); err == nil {
		r.rep.IPVS = out
	}
	if out, err := r.kubectlRun(ctx, 20*time.Second, nil, "logs", "-n", "kube-system", "-l", "k8s-app=kube-dns", "--tail", "20"); err == nil {
		r.logf("CoreDNS log (last lines):\n%s", strings.TrimSpace(out))
	}
	return nil
}
