package server

import (
	"fmt"
	"io"
	"net/http"
)

// FlagsVPath is where, with enableProfiling, the log verbosity is changed at run time, as
// in kube-proxy: PUT the new -v as the body.
const FlagsVPath = "/debug/flags/v"

// HandleFlagsV serves FlagsVPath and the /debug/flags index on mux: a PUT calls set with the
// body and answers its message (400 with the error when it fails), any other method gets
// 406, each as text/plain, as kube-proxy's handler answers.
func HandleFlagsV(mux *http.ServeMux, set func(string) (string, error)) {
	index := func(w http.ResponseWriter, _ *http.Request) {
		plainText(w, http.StatusOK, "/debug/flags/\n\nflags:\nv")
	}
	mux.HandleFunc("/debug/flags", index)
	mux.HandleFunc("/debug/flags/", index)
	mux.HandleFunc(FlagsVPath, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPut {
			plainText(w, http.StatusNotAcceptable, "unsupported http method")
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 64))
		if err != nil {
			plainText(w, http.StatusBadRequest, "error reading request body: "+err.Error())
			return
		}
		msg, err := set(string(body))
		if err != nil {
			plainText(w, http.StatusBadRequest, err.Error())
			return
		}
		plainText(w, http.StatusOK, msg)
	})
}

func plainText(w http.ResponseWriter, status int, text string) {
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	fmt.Fprintln(w, text)
}
