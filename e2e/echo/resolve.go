package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"
)

// resolveLimit bounds one -resolve run: the Go resolver's own retries included.
const resolveLimit = 10 * time.Second

// resolve writes the IPv4 addresses name resolves to, as "NAME IP[,IP...] via SERVER/NET in DURATION\n",
// using Go's own resolver (no libc, so the image needs no NSS files). With server empty the
// query goes where /etc/resolv.conf says (nameserver, search list, ndots), as a pod's would;
// otherwise to server (host:port) alone. network "udp" or "tcp" sends every query over that
// protocol (no UDP first, no fallback); empty leaves the choice to the resolver (UDP, TCP when
// truncated). An empty answer is an error; an error also says how long the lookup took.
func resolve(w io.Writer, name, server, network string) error {
	switch network {
	case "", "udp", "tcp":
	default:
		return fmt.Errorf("-dns-net %q: want udp or tcp", network)
	}
	var (
		mu   sync.Mutex
		used []string // SERVER/NET of every query the resolver sent
	)
	var d net.Dialer
	r := &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, netw, addr string) (net.Conn, error) {
			if network != "" {
				netw = network
			}
			if server != "" {
				addr = server
			}
			mu.Lock()
			used = append(used, addr+"/"+netw)
			mu.Unlock()
			// A stream connection makes the resolver frame its query for TCP, whatever
			// network it asked for.
			return d.DialContext(ctx, netw, addr)
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), resolveLimit)
	defer cancel()
	start := time.Now()
	ips, err := r.LookupIP(ctx, "ip4", name)
	took := time.Since(start).Round(time.Millisecond)
	mu.Lock()
	via := strings.Join(dedup(used), ",")
	mu.Unlock()
	if err != nil {
		return fmt.Errorf("resolve %s via %s in %s: %w", name, via, took, err)
	}
	if len(ips) == 0 {
		return fmt.Errorf("resolve %s via %s in %s: no address", name, via, took)
	}
	addrs := make([]string, len(ips))
	for i, ip := range ips {
		addrs[i] = ip.String()
	}
	_, err = fmt.Fprintf(w, "%s %s via %s in %s\n", name, strings.Join(addrs, ","), via, took)
	return err
}

// dedup keeps the first of each string, in order.
func dedup(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
