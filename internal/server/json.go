package server

import (
	"encoding/json"
	"net/http"
)

// getOnly answers a method other than GET or HEAD with 405 and reports whether it did.
func getOnly(w http.ResponseWriter, r *http.Request) (refused bool) {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return false
	}
	w.Header().Set("Allow", "GET, HEAD")
	http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	return true
}

// writeJSON answers v as JSON with status and the headers every JSON endpoint sends, or 500
// when v cannot be encoded.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
