package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/kipvs/kipvs/internal/debugapi"
)

func TestVirtualServersHandler(t *testing.T) {
	items := []debugapi.VirtualServer{{Protocol: "TCP", Address: "10.96.0.1", Port: 443, Kind: "ClusterIP",
		Namespace: "default", Name: "kubernetes", PortName: "https", Destinations: 1}}
	h := VirtualServersHandler(func() []debugapi.VirtualServer { return items })

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, debugapi.VirtualServersPath, nil))
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("GET: %d %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	var got debugapi.VirtualServerList
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Items) != 1 || got.Items[0] != items[0] {
		t.Errorf("items = %+v", got.Items)
	}

	items = nil
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, debugapi.VirtualServersPath, nil))
	if body := rec.Body.String(); body != `{"items":[]}` {
		t.Errorf("empty list body = %s", body)
	}

	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, debugapi.VirtualServersPath, nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d, want 405", rec.Code)
	}
}
