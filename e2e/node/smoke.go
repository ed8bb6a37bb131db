package node

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/kipvs/kipvs/internal/testutil/poll"
)

// smokeManifests: two echo backends behind a NodePort Service (so a ClusterIP too), and a
// client pod to request it from. The pods run e2e/echo from the imported image (never pulled).
const smokeManifests = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: echo
  namespace: default
spec:
  replicas: 2
  selector:
    matchLabels:
      app: echo
  template:
    metadata:
      labels:
        app: echo
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: echo
        image: %[1]s
        imagePullPolicy: Never
        command: ["/echo", "-listen", ":8080", "-tcp-only"]
        readinessProbe:
          httpGet:
            path: /
            port: 8080
          periodSeconds: 2
          timeoutSeconds: 5
---
apiVersion: v1
kind: Service
metadata:
  name: echo
  namespace: default
spec:
  type: NodePort
  selector:
    app: echo
  ports:
  - name: http
    port: 80
    targetPort: 8080
---
apiVersion: v1
kind: Pod
metadata:
  name: client
  namespace: default
  labels:
    app: client
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: client
    image: %[1]s
    imagePullPolicy: Never
    command: ["/echo", "-listen", ":8081", "-tcp-only"]
`

// smoke applies the echo Service and its pods, then requests the ClusterIP from the client
// pod (kubectl exec: the apiserver reaches the kubelet) until both backends have answered,
// and the NodePort on the node's InternalIP from the host likewise. Without kube-proxy on
// the node, an answer can only come through kipvs's IPVS.
func (r *runner) smoke(ctx context.Context) error {
	if _, err := r.kubectlRun(ctx, time.Minute, []byte(fmt.Sprintf(smokeManifests, r.cfg.EchoImage)),
		"apply", "--server-side", "-f", "-"); err != nil {
		return err
	}
	if err := r.waitPodsReady(ctx, 3*time.Minute, "default", "app in (echo,client)", 3); err != nil {
		return err
	}
	ip, err := r.kubectlRun(ctx, 10*time.Second, nil, "get", "service", "echo", "-o", "jsonpath={.spec.clusterIP}")
	if err != nil {
		return err
	}
	url := "http://" + strings.TrimSpace(ip) + ":80/"
	backends, err := r.kubectlRun(ctx, 10*time.Second, nil, "get", "pods", "-l", "app=echo", "-o",
		`jsonpath={range .items[*]}{.metadata.name}{"\n"}{end}`)
	if err != nil {
		return err
	}
	want := strings.Fields(backends)
	answered := map[string]bool{}
	var answers []string
	// Every echo pod answers once the proxy programmed both endpoints: kube-proxy's syncs on
	// two TCG nodes took over two minutes (the reference run).
	_, err = poll.Wait(6*time.Minute, "GET "+url+" from pod client answered by every echo pod", func() (bool, string) {
		out, err := r.kubectlRun(ctx, 20*time.Second, nil, "exec", "client", "--", "/echo", "-get", url)
		if err != nil {
			return false, err.Error()
		}
		line := strings.TrimSpace(out)
		answers = append(answers, line)
		if f := strings.Fields(line); len(f) > 0 {
			answered[f[0]] = true
		}
		for _, w := range want {
			if !answered[w] {
				return false, fmt.Sprintf("answers so far: %s", strings.Join(answers, "; "))
			}
		}
		return true, ""
	})
	r.rep.Answer = strings.Join(answers, "\n")
	if err != nil {
		return err
	}
	got := make([]string, 0, len(answered))
	for a := range answered {
		got = append(got, a)
	}
	sort.Strings(got)
	r.logf("%s answered by %s (%d requests)", url, strings.Join(got, ", "), len(answers))
	if err := r.nodePort(ctx, want); err != nil {
		return err
	}
	r.ipvsTable(ctx)
	r.rep.Pods, _ = r.kubectlRun(ctx, 20*time.Second, nil, "get", "pods", "-A", "-o", "wide")
	return nil
}

// nodePort requests the echo Service's NodePort on each node's InternalIP from the host (over
// the link) until every backend in want has answered from it: with two nodes, each node's
// proxy sends some of them to the other node's pods.
func (r *runner) nodePort(ctx context.Context, want []string) error {
	port, err := r.kubectlRun(ctx, 10*time.Second, nil, "get", "service", "echo", "-o", "jsonpath={.spec.ports[0].nodePort}")
	if err != nil {
		return err
	}
	for _, n := range r.nodes {
		if err := r.nodePortOn(ctx, n.ip, strings.TrimSpace(port), want); err != nil {
			return err
		}
	}
	return nil
}

func (r *runner) nodePortOn(ctx context.Context, nodeIP net.IP, port string, want []string) error {
	url := "http://" + net.JoinHostPort(nodeIP.String(), port) + "/"
	client := &http.Client{Timeout: 5 * time.Second}
	answered := map[string]bool{}
	var answers []string
	_, err := poll.Wait(3*time.Minute, "GET "+url+" from the host answered by every echo pod", func() (bool, string) {
		resp, err := client.Get(url)
		if err != nil {
			return false, err.Error()
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return false, err.Error()
		}
		line := strings.TrimSpace(string(b))
		answers = append(answers, line)
		if f := strings.Fields(line); len(f) > 0 {
			answered[f[0]] = true
		}
		for _, w := range want {
			if !answered[w] {
				return false, "answers so far: " + strings.Join(answers, "; ")
			}
		}
		return true, ""
	})
	if err != nil {
		return err
	}
	r.rep.Answer += "\n" + strings.Join(answers, "\n")
	r.logf("%s (NodePort, from the host) answered by every echo pod (%d requests): %s", url, len(answers), strings.Join(answers, "; "))
	return nil
}
