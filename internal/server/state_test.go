package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/kipvs/kipvs/internal/debugapi"
)

func TestStateHandler(t *testing.T) {
	st := debugapi.State{Dummy: "kube-ipvs0", GracefulPeriod: "30s", Schedulers: map[string]bool{"rr": true, "mh": false},
		ServiceCIDRs: []string{"10.96.0.0/12"},
		Families: []debugapi.FamilyState{{Family: "IPv4", Synced: true, Addresses: []string{"10.96.0.10"},
			Sets:           []debugapi.SetState{{Name: "KUBE-CLUSTER-IP", Type: "hash:ip,port", Members: []string{"10.96.0.10,tcp:80"}}},
			VirtualServers: []debugapi.VirtualServer{{Protocol: "TCP", Address: "10.96.0.10", Port: 80, Kind: "ClusterIP", Namespace: "default", Name: "web", Destinations: 1}},
			Rules:          "*filter\n:KUBE-FORWARD - [0:0]\nCOMMIT\n",
			Draining: []debugapi.DrainingRealServer{{Protocol: "TCP", Address: "10.96.0.10", Port: 80, RealServer: "10.244.1.5:8080",
				Since: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)}},
		}},
	}
	h := StateHandler(func() debugapi.State { return st })
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, debugapi.StatePath, nil))
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("GET: %d %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	var got debugapi.State
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, st) {
		t.Errorf("round trip:\n%+v\nwant\n%+v", got, st)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPut, debugapi.StatePath, nil))
	if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "GET, HEAD" {
		t.Errorf("PUT: %d", rec.Code)
	}
}
