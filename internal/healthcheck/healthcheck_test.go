package healthcheck

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func get(t *testing.T, port uint16) (int, string, http.Header) {
	t.Helper()
	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(int(port)) + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func freePort(t *testing.T) uint16 {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return uint16(l.Addr().(*net.TCPAddr).Port)
}

func TestServesKubeProxyBodyAndStatus(t *testing.T) {
	var healthy atomic.Bool
	healthy.Store(true)
	m := New([]string{"127.0.0.1"}, healthy.Load, nil, nil, nil)
	defer m.Close()
	svc := types.NamespacedName{Namespace: "web", Name: "lb"}
	port := freePort(t)
	ctx := context.Background()

	m.Sync(ctx, map[types.NamespacedName]Service{svc: {Port: port, LocalEndpoints: 2}})
	code, got, hdr := get(t, port)
	want := "{\n\t\"service\": {\n\t\t\"namespace\": \"web\",\n\t\t\"name\": \"lb\"\n\t},\n\t\"localEndpoints\": 2,\n\t\"serviceProxyHealthy\": true\n}"
	if code != 200 || got != want {
		t.Fatalf("got %d %q, want 200 %q", code, got, want)
	}
	if hdr.Get("Content-Type") != "application/json" || hdr.Get("X-Load-Balancing-Endpoint-Weight") != "2" {
		t.Errorf("headers %v", hdr)
	}

	m.Sync(ctx, map[types.NamespacedName]Service{svc: {Port: port, LocalEndpoints: 0}})
	if code, body, _ := get(t, port); code != 503 || !strings.Contains(body, `"localEndpoints": 0`) {
		t.Errorf("no local endpoints: %d %s", code, body)
	}
	m.Sync(ctx, map[types.NamespacedName]Service{svc: {Port: port, LocalEndpoints: 1}})
	healthy.Store(false)
	var b body
	code, raw, _ := get(t, port)
	if err := json.Unmarshal([]byte(raw), &b); err != nil || code != 503 || b.ServiceProxyHealthy {
		t.Errorf("unhealthy proxy: %d %s %v", code, raw, err)
	}

	// Removed: the port closes.
	m.Sync(ctx, nil)
	if _, err := http.Get("http://127.0.0.1:" + strconv.Itoa(int(port)) + "/"); err == nil {
		t.Error("health check still served after the Service went away")
	}
}

// A port held by another process is reported, not fatal, and retried on the next Sync.
func TestPortConflictReportedAndRetried(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := uint16(held.Addr().(*net.TCPAddr).Port)
	var reports []string
	m := New([]string{"127.0.0.1"}, func() bool { return true }, nil, func(n types.NamespacedName, reason, msg string) {
		reports = append(reports, n.String()+" "+reason+" "+msg)
	}, nil)
	defer m.Close()
	svc := types.NamespacedName{Namespace: "a", Name: "b"}
	want := map[types.NamespacedName]Service{svc: {Port: port, LocalEndpoints: 1}}
	m.Sync(context.Background(), want)
	if len(reports) != 1 || !strings.Contains(reports[0], "FailedToStartServiceHealthcheck") || !strings.Contains(reports[0], strconv.Itoa(int(port))) {
		t.Fatalf("reports = %v", reports)
	}
	if len(m.Ports()) != 0 {
		t.Fatalf("conflicting port recorded as open: %v", m.Ports())
	}
	held.Close()
	m.Sync(context.Background(), want)
	if code, _, _ := get(t, port); code != 200 {
		t.Fatalf("after the port was freed: %d", code)
	}
}
