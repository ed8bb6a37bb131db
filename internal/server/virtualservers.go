package server

import (
	"encoding/json"
	"net/http"
)

// VirtualServersPath is a read-only debug endpoint of the metrics server: the virtual
// servers the daemon wants (its desired state, both families) and the Service port each
// one is programmed for. `kipvs status --services` reads it.
const VirtualServersPath = "/debug/kipvs/virtualservers"

// VirtualServer is one entry of the VirtualServersPath document.
type VirtualServer struct {
	// Protocol is "TCP", "UDP" or "SCTP".
	Protocol string `json:"protocol"`
	Address  string `json:"address"`
	Port     uint16 `json:"port"`
	// Kind is ClusterIP, ExternalIP, LoadBalancer or NodePort.
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// PortName is the Service port's name ("" for an unnamed port).
	PortName     string `json:"portName,omitempty"`
	Destinations int    `json:"destinations"`
}

// VirtualServerList is the VirtualServersPath document.
type VirtualServerList struct {
	Items []VirtualServer `json:"items"`
}

// VirtualServersHandler serves list() as a VirtualServerList (GET only).
func VirtualServersHandler(list func() []VirtualServer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		items := list()
		if items == nil {
			items = []VirtualServer{}
		}
		b, err := json.Marshal(VirtualServerList{Items: items})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, _ = w.Write(b)
	})
}
