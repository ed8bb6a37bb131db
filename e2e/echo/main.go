package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"
)

func main() {
	name := flag.String("name", "", "name to report (default: hostname)")
	listen := flag.String("listen", ":8080", "address for both the TCP (HTTP) and the UDP listener")
	tcpOnly := flag.Bool("tcp-only", false, "do not listen on UDP")
	withSCTP := flag.Bool("sctp", false, "also listen on SCTP (needs the kernel's sctp module)")
	get := flag.String("get", "", "client mode: GET this URL, print the body and exit")
	lookup := flag.String("resolve", "", "client mode: print this name's IPv4 addresses and exit")
	dnsServer := flag.String("dns-server", "", "with -resolve: the DNS server (HOST:PORT); default: /etc/resolv.conf's")
	dnsNet := flag.String("dns-net", "", "with -resolve: udp or tcp for every query; default: UDP, TCP when truncated")
	flag.Parse()
	if *lookup != "" {
		if err := resolve(os.Stdout, *lookup, *dnsServer, *dnsNet); err != nil {
			log.Fatalf("echo: %v", err)
		}
		return
	}
	if *get != "" {
		if err := fetch(*get); err != nil {
			log.Fatalf("echo: %v", err)
		}
		return
	}
	if *name == "" {
		*name, _ = os.Hostname()
	}
	if *withSCTP {
		_, portStr, err := net.SplitHostPort(*listen)
		if err != nil {
			log.Fatalf("echo: -listen %s: %v", *listen, err)
		}
		port, err := strconv.Atoi(portStr)
		if err != nil {
			log.Fatalf("echo: -listen %s: port: %v", *listen, err)
		}
		fd, err := listenSCTP(port)
		if err != nil {
			log.Fatalf("echo: %v", err)
		}
		go func() { log.Fatalf("echo: %v", serveSCTP(fd, *name)) }()
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
			if r.URL.Path == "/hold" {
				hold(w, *name, r.RemoteAddr)
				return
			}
			w.Header().Set("Connection", "close")
			fmt.Fprintf(w, "%s %s\n", *name, r.RemoteAddr)
		}),
	}
	srv.SetKeepAlivesEnabled(false)
	log.Fatal(srv.ListenAndServe())
}

// hold takes the connection over from the HTTP server (no header or idle timeout applies any
// more), answers like GET / and then echoes lines until the client closes.
func hold(w http.ResponseWriter, name, remote string) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "cannot hold this connection", http.StatusInternalServerError)
		return
	}
	conn, rw, err := hj.Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Time{})
	if _, err := fmt.Fprintf(conn, "HTTP/1.0 200 OK\r\n\r\n%s %s\n", name, remote); err != nil {
		return
	}
	for {
		line, err := rw.Reader.ReadString('\n')
		if err != nil {
			return
		}
		if _, err := io.WriteString(conn, line); err != nil {
			return
		}
	}
}

// fetch prints the body of a GET of url.
func fetch(url string) error {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(os.Stdout, resp.Body); err != nil {
		return fmt.Errorf("GET %s: body: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}
