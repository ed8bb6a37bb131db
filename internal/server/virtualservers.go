package server

import (
	"net/http"

	"github.com/kipvs/kipvs/internal/debugapi"
)

// VirtualServersHandler serves list() as a debugapi.VirtualServerList (GET only).
func VirtualServersHandler(list func() []debugapi.VirtualServer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if getOnly(w, r) {
			return
		}
		items := list()
		if items == nil {
			items = []debugapi.VirtualServer{}
		}
		writeJSON(w, http.StatusOK, debugapi.VirtualServerList{Items: items})
	})
}
