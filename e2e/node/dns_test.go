package node

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// The kube-dns manifests parse strictly, fit together, and hold what the node and the DNS
// tests rely on: kubeadm's Service at the kubelet's clusterDNS, its labels, probes,
// securityContext and Corefile (less forward), with the run's image.
func TestKubeDNSManifests(t *testing.T) {
	const image = "registry.example/coredns:test"
	b, err := kubeDNSManifests(image)
	if err != nil {
		t.Fatal(err)
	}
	k, err := parseKubeDNS(b)
	if err != nil {
		t.Fatal(err)
	}
	svc := k.Service
	if svc.Spec.ClusterIP != "10.96.0.10" || ClusterDNS != "10.96.0.10" {
		t.Errorf("Service clusterIP %s (ClusterDNS %s), want 10.96.0.10", svc.Spec.ClusterIP, ClusterDNS)
	}
	var ports []string
	for _, p := range svc.Spec.Ports {
		ports = append(ports, p.Name+" "+string(p.Protocol)+" "+p.TargetPort.String())
	}
	if got := strings.Join(ports, ", "); got != "dns UDP 53, dns-tcp TCP 53, metrics TCP 9153" {
		t.Errorf("Service ports: %s", got)
	}
	pod := k.Deployment.Spec.Template
	if pod.Labels["k8s-app"] != "kube-dns" || svc.Labels["k8s-app"] != "kube-dns" || k.Deployment.Labels["k8s-app"] != "kube-dns" {
		t.Errorf("k8s-app labels: pod %v, Service %v, Deployment %v", pod.Labels, svc.Labels, k.Deployment.Labels)
	}
	if r := *k.Deployment.Spec.Replicas; r != 1 {
		t.Errorf("replicas %d, want 1 (one node)", r)
	}
	c := pod.Spec.Containers[0]
	if c.Image != image {
		t.Errorf("image %q, want %q", c.Image, image)
	}
	if pod.Spec.DNSPolicy != corev1.DNSDefault || pod.Spec.PriorityClassName != "system-cluster-critical" {
		t.Errorf("dnsPolicy %s, priorityClassName %s", pod.Spec.DNSPolicy, pod.Spec.PriorityClassName)
	}
	probe := func(p *corev1.Probe) string {
		port := p.HTTPGet.Port.String()
		for _, cp := range c.Ports {
			if cp.Name == port {
				port = fmt.Sprintf("%s=%d", cp.Name, cp.ContainerPort)
			}
		}
		return p.HTTPGet.Path + " " + port
	}
	if got := probe(c.LivenessProbe) + ", " + probe(c.ReadinessProbe); got != "/health liveness-probe=8080, /ready readiness-probe=8181" {
		t.Errorf("probes: %s", got)
	}
	sc := c.SecurityContext
	if sc == nil || *sc.AllowPrivilegeEscalation || !*sc.ReadOnlyRootFilesystem ||
		len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" ||
		len(sc.Capabilities.Add) != 1 || sc.Capabilities.Add[0] != "NET_BIND_SERVICE" {
		t.Errorf("securityContext %+v", sc)
	}
	cf := k.ConfigMap.Data["Corefile"]
	for _, want := range []string{".:53 {", "errors", "health {", "ready", "kubernetes cluster.local in-addr.arpa ip6.arpa {",
		"pods insecure", "fallthrough in-addr.arpa ip6.arpa", "prometheus :9153", "cache 30", "loop", "reload", "loadbalance"} {
		if !strings.Contains(cf, want) {
			t.Errorf("Corefile lacks %q:\n%s", want, cf)
		}
	}
	if strings.Contains(cf, "forward") {
		t.Errorf("Corefile forwards (the node has no upstream DNS):\n%s", cf)
	}
	var rules []string
	for _, r := range k.ClusterRole.Rules {
		rules = append(rules, strings.Join(r.APIGroups, ",")+":"+strings.Join(r.Resources, ",")+":"+strings.Join(r.Verbs, ","))
	}
	if got := strings.Join(rules, " "); got != ":endpoints,services,pods,namespaces:list,watch discovery.k8s.io:endpointslices:list,watch" {
		t.Errorf("ClusterRole rules: %s", got)
	}
	if _, err := kubeDNSManifests("coredns"); err == nil {
		t.Error("an image without a tag is accepted")
	}
}

// Manifests that do not fit together are refused, naming the object and field.
func TestKubeDNSManifestsRefused(t *testing.T) {
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"cluster IP", "clusterIP: 10.96.0.10", "clusterIP: 10.96.0.11", `Service kube-dns: spec.clusterIP "10.96.0.11", want the kubelet's clusterDNS 10.96.0.10`},
		{"port", "  - name: dns-tcp\n    port: 53\n    protocol: TCP", "  - name: dns-tcp\n    port: 53\n    protocol: UDP", "Service kube-dns: spec.ports: dns 53/UDP->53, dns-tcp 53/UDP->53"},
		{"selector", "  selector:\n    k8s-app: kube-dns\n", "  selector:\n    k8s-app: coredns\n", "Service kube-dns: labels"},
		{"pod labels", "  template:\n    metadata:\n      labels:\n        k8s-app: kube-dns", "  template:\n    metadata:\n      labels:\n        k8s-app: dns", "do not carry the Service's selector k8s-app=kube-dns"},
		{"service account", "serviceAccountName: coredns", "serviceAccountName: default", `serviceAccountName "default"`},
		{"binding", "- kind: ServiceAccount\n  name: coredns", "- kind: ServiceAccount\n  name: dns", "ClusterRoleBinding system:coredns"},
		{"unknown field", "  replicas: 1", "  replicas: 1\n  replica: 2", `document 4 (Deployment): error unmarshaling JSON: while decoding JSON: json: unknown field "replica"`},
		{"duplicate", "apiVersion: v1\nkind: ServiceAccount", "apiVersion: v1\nkind: Service\nmetadata:\n  name: x\n---\napiVersion: v1\nkind: ServiceAccount", "a second Service"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !bytes.Contains(corednsYAML, []byte(tc.old)) {
				t.Fatalf("manifests/coredns.yaml no longer holds %q", tc.old)
			}
			_, err := parseKubeDNS(bytes.Replace(corednsYAML, []byte(tc.old), []byte(tc.new), 1))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}
