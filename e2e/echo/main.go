// Command echo is the test backend of kipvs's VM tests and demo: it answers every HTTP
// request on TCP and every datagram on UDP with one line naming itself and the client's
// address as it sees it, so a test can tell which backend answered and whether the source
// was masqueraded.
//
//	echo -name pod-a -listen :8080
//
// HTTP: GET / answers "pod-a 10.244.9.9:51234\n". UDP: any datagram is answered the same way.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"time"
)

func main() {
	name := flag.String("name", "", "name to report (default: hostname)")
	listen := flag.String("listen", ":8080", "address for both the TCP (HTTP) and the UDP listener")
	tcpOnly := flag.Bool("tcp-only", false, "do not listen on UDP")
	flag.Parse()
	if *name == "" {
		*name, _ = os.Hostname()
	}
	if !*tcpOnly {
		pc, err := net.ListenPacket("udp", *listen)
		if err != nil {
			log.Fatalf("echo: listen udp %s: %v", *listen, err)
		}
		go func() {
			buf := make([]byte, 2048)
			for {
				_, addr, err := pc.ReadFrom(buf)
				if err != nil {
					log.Fatalf("echo: udp: %v", err)
				}
				_, _ = pc.WriteTo([]byte(fmt.Sprintf("%s %s\n", *name, addr)), addr)
			}
		}()
	}
	srv := &http.Server{
		Addr:              *listen,
		ReadHeaderTimeout: 10 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Connection", "close")
			fmt.Fprintf(w, "%s %s\n", *name, r.RemoteAddr)
		}),
	}
	srv.SetKeepAlivesEnabled(false)
	log.Fatal(srv.ListenAndServe())
}
