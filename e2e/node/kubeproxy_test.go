package node

import (
	"bytes"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// splitDocs splits a multi-document YAML stream.
func splitDocs(t *testing.T, b []byte) [][]byte {
	t.Helper()
	var docs [][]byte
	for _, d := range bytes.Split(b, []byte("\n---\n")) {
		if len(bytes.TrimSpace(d)) > 0 {
			docs = append(docs, d)
		}
	}
	return docs
}

// The kube-proxy manifest parses into kubeadm's objects with the run's values: mode ipvs, the
// pod CIDR, the apiserver, the image, metrics served to the host.
func TestKubeProxyManifest(t *testing.T) {
	const server, image = "https://192.168.132.1:6443", "registry.k8s.io/kube-proxy:v1.34.10"
	b, err := renderKubeProxy(kubeProxyValues{ControlPlaneEndpoint: server, ClusterCIDR: DefaultPodCIDR, Image: image})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	var ds appsv1.DaemonSet
	var cm corev1.ConfigMap
	var crb rbacv1.ClusterRoleBinding
	for _, d := range splitDocs(t, b) {
		var meta struct{ Kind string }
		if err := yaml.Unmarshal(d, &meta); err != nil {
			t.Fatalf("document does not parse: %v\n%s", err, d)
		}
		kinds[meta.Kind]++
		var into any
		switch meta.Kind {
		case "DaemonSet":
			into = &ds
		case "ConfigMap":
			into = &cm
		case "ClusterRoleBinding":
			into = &crb
		default:
			continue
		}
		if err := yaml.UnmarshalStrict(d, into); err != nil {
			t.Fatalf("%s: %v", meta.Kind, err)
		}
	}
	want := map[string]int{"ServiceAccount": 1, "ClusterRoleBinding": 1, "Role": 1, "RoleBinding": 1, "ConfigMap": 1, "DaemonSet": 1}
	for k, n := range want {
		if kinds[k] != n {
			t.Errorf("%d %s, want %d (all: %v)", kinds[k], k, n, kinds)
		}
	}
	if crb.Name != "kubeadm:node-proxier" || crb.RoleRef.Name != "system:node-proxier" ||
		len(crb.Subjects) != 1 || crb.Subjects[0].Name != "kube-proxy" || crb.Subjects[0].Namespace != "kube-system" {
		t.Errorf("ClusterRoleBinding: %+v", crb)
	}
	var conf struct {
		APIVersion, Kind, Mode, ClusterCIDR, MetricsBindAddress, BindAddress string
		ClientConnection                                                     struct{ Kubeconfig string }
	}
	if err := yaml.Unmarshal([]byte(cm.Data["config.conf"]), &conf); err != nil {
		t.Fatalf("config.conf: %v", err)
	}
	if conf.Kind != "KubeProxyConfiguration" || conf.APIVersion != "kubeproxy.config.k8s.io/v1alpha1" || conf.Mode != "ipvs" ||
		conf.ClusterCIDR != DefaultPodCIDR || conf.MetricsBindAddress != "0.0.0.0:10249" ||
		conf.ClientConnection.Kubeconfig != "/var/lib/kube-proxy/kubeconfig.conf" {
		t.Errorf("config.conf: %+v\n%s", conf, cm.Data["config.conf"])
	}
	if !strings.Contains(cm.Data["kubeconfig.conf"], "server: "+server+"\n") {
		t.Errorf("kubeconfig.conf lacks the server:\n%s", cm.Data["kubeconfig.conf"])
	}
	if ds.Namespace != "kube-system" || ds.Name != "kube-proxy" {
		t.Errorf("DaemonSet %s/%s", ds.Namespace, ds.Name)
	}
	spec := ds.Spec.Template.Spec
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers", len(spec.Containers))
	}
	c := spec.Containers[0]
	if c.Image != image || c.Command[0] != "/usr/local/bin/kube-proxy" || c.Command[1] != "--config=/var/lib/kube-proxy/config.conf" {
		t.Errorf("container: image %q command %q", c.Image, c.Command)
	}
	if !spec.HostNetwork || c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged ||
		spec.PriorityClassName != "system-node-critical" || spec.ServiceAccountName != "kube-proxy" {
		t.Errorf("pod spec: hostNetwork %v, securityContext %+v, priority class %q, service account %q",
			spec.HostNetwork, c.SecurityContext, spec.PriorityClassName, spec.ServiceAccountName)
	}
	mounts := map[string]bool{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath+" ro="+map[bool]string{true: "yes", false: "no"}[m.ReadOnly]] = true
	}
	for _, m := range []string{"/var/lib/kube-proxy ro=no", "/run/xtables.lock ro=no", "/lib/modules ro=yes"} {
		if !mounts[m] {
			t.Errorf("no mount %s (%v)", m, mounts)
		}
	}
	if len(spec.Tolerations) != 1 || spec.Tolerations[0].Operator != corev1.TolerationOpExists {
		t.Errorf("tolerations: %+v", spec.Tolerations)
	}

	if _, err := renderKubeProxy(kubeProxyValues{ControlPlaneEndpoint: server, ClusterCIDR: DefaultPodCIDR}); err == nil ||
		!strings.Contains(err.Error(), "image") {
		t.Errorf("no image: %v", err)
	}
}

// /proc/net/ip_vs becomes ipvsadm -Ln's layout; anything else is refused (the raw text is
// printed then).
func TestFormatProcIPVS(t *testing.T) {
	in := `IP Virtual Server version 1.2.1 (size=4096)
Prot LocalAddress:Port Scheduler Flags
  -> RemoteAddress:Port Forward Weight ActiveConn InActConn
TCP  0A600001:01BB rr
  -> C0A88401:9D7D      Masq    1      0          0
TCP  C0A88402:7594 rr persistent 10800
  -> 0AF40002:1F90      Masq    1      0          2
`
	got, err := formatProcIPVS(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"TCP  10.96.0.1:443 rr\n", "  -> 192.168.132.1:40317", "TCP  192.168.132.2:30100 rr persistent 10800\n",
		"  -> 10.244.0.2:8080              Masq    1      0          2\n"} {
		if !strings.Contains(got, w) {
			t.Errorf("lacks %q:\n%s", w, got)
		}
	}
	if _, err := formatProcIPVS("FWM  00000001 rr\n"); err == nil {
		t.Error("not /proc/net/ip_vs: accepted")
	}
}
