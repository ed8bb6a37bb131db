package server

import (
	"net/http"

	"github.com/kipvs/kipvs/internal/debugapi"
)

// StateHandler serves get() as a debugapi.State (GET only).
func StateHandler(get func() debugapi.State) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if getOnly(w, r) {
			return
		}
		writeJSON(w, http.StatusOK, get())
	})
}
