package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kipvs/kipvs/internal/debugapi"
)

// Issue 23, finding 6: the debug endpoints listed every Service, pod IP and rule to anyone
// who reached the metrics address. They are off unless asked for, and then answer 404 with
// the way to turn them on (and nothing else).
func TestDebugEndpointsOffByDefault(t *testing.T) {
	vs := func() []debugapi.VirtualServer {
		return []debugapi.VirtualServer{{Protocol: "TCP", Address: "10.96.0.10", Port: 80, Namespace: "default", Name: "web"}}
	}
	st := func() debugapi.State {
		return debugapi.State{Dummy: "kube-ipvs0", Families: []debugapi.FamilyState{{Family: "IPv4", Addresses: []string{"10.96.0.10"}}}}
	}
	for _, enabled := range []bool{false, true} {
		mux := http.NewServeMux()
		HandleDebug(mux, enabled, vs, st)
		for _, path := range []string{debugapi.StatePath, debugapi.VirtualServersPath, debugapi.DebugPrefix + "other"} {
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
			body := rec.Body.String()
			switch {
			case !enabled && (rec.Code != 404 || rec.Header().Get(debugapi.DebugHeader) != debugapi.DebugDisabled ||
				!strings.Contains(body, "--kipvs-debug-endpoints") || strings.Contains(body, "10.96.0.10")):
				t.Errorf("off: GET %s = %d %s %q, want 404 %s: %s naming the flag, and no data", path, rec.Code,
					rec.Header().Get(debugapi.DebugHeader), body, debugapi.DebugHeader, debugapi.DebugDisabled)
			case enabled && path != debugapi.DebugPrefix+"other" && (rec.Code != 200 || !strings.Contains(body, "10.96.0.10")):
				t.Errorf("on: GET %s = %d %q, want 200 with the data", path, rec.Code, body)
			}
		}
	}
}
