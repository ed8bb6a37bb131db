package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"time"

	"github.com/spf13/cobra"
	"github.com/vishvananda/netns"

	"github.com/kipvs/kipvs/internal/debugapi"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/ipvsadm"
)

func newStatusCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "status [ipvsadm listing options]",
		Aliases: []string{"ipvsadm"},
		Short:   "Show the IPVS table as ipvsadm does (read through kipvs's own netlink code)",
		Long: `status prints the IPVS table of this node's network namespace byte for byte as
ipvsadm 1.31 with -n prints it, without needing ipvsadm. It takes ipvsadm's listing options:

  -L, -l, --list          list the table (the default)
  -S, --save              print the table as ipvsadm rules
  -n, --numeric           accepted; output is always numeric (see below)
  -c, --connection        list connections (read from /proc/net/ip_vs_conn)
      --timeout           print the tcp, tcpfin and udp timeouts
      --stats             counters          --rate           rate estimates
  -X, --exact             exact numbers with --stats / --rate
      --thresholds        upper/lower connection thresholds
      --persistent-conn   persistent connection counts (with -c: persistence engine data)
      --tun-info          tunnel settings of Tunnel real servers
      --sort, --nosort    sort (the default, exactly as ipvsadm does) or keep the kernel's order
  -t, --tcp-service A:P   list one TCP service (-u/--udp-service, --sctp-service likewise)
  -f, --fwmark-service M  list one firewall-mark service (-6 after it: the IPv6 one)

Short options may be bundled (-Ln, -Lnc). Unlike ipvsadm, kipvs never resolves addresses
or ports to names: without -n it prints the same numeric output as with -n.

Exit status, as ipvsadm's: 0 on success; 255 for an unknown option, a missing value or a
value given to a flag; 2 for options that conflict, a bad address or fwmark, or a stray
argument; 1 for a -t/-u/-f service that does not exist and for any other error (IPVS
unreadable, the daemon unreachable for --services).

kipvs extras (not ipvsadm output):
  -o, --output json       a stable JSON document instead (sorted numerically; with
                          --nosort in the kernel's order); works with -L, -t/-u/-f, -c
                          and --timeout
      --services          annotate every virtual server with the Kubernetes Service
                          ports it was programmed for ("  # namespace/name:port" after
                          the service line, "owners" in JSON), asked from the running
                          kipvs daemon's metrics server (needs
                          kipvs run --kipvs-debug-endpoints)
      --metrics-address A the daemon's metrics address (default ` + ipvsadm.DefaultMetricsAddress + `)

Options that change IPVS (-A, -E, -D, -a, -e, -d, -C, -Z, --set, -R) are refused.`,
		DisableFlagParsing: true,
		SilenceUsage:       true,
		RunE: func(cmd *cobra.Command, args []string) error {
			o, err := ipvsadm.Parse(args, ipvsadm.NetResolver{})
			if err != nil {
				if ipvsadm.IsUsageError(err) {
					return fmt.Errorf("%w (try 'kipvs status --help')", err)
				}
				return err
			}
			if o.Help {
				return cmd.Help()
			}
			env := ipvsadm.Env{Owners: fetchOwners}
			if !o.Connections {
				c, err := ipvs.New(netns.None())
				if err != nil {
					return fmt.Errorf("open IPVS (is the ip_vs module loaded?): %w", err)
				}
				defer c.Close()
				env.IPVS = c
			}
			return ipvsadm.Run(cmd.OutOrStdout(), o, env)
		},
	}
}

// fetchOwners asks the running daemon which Service ports its virtual servers belong to.
func fetchOwners(addr string) (ipvsadm.Owners, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	url := "http://" + addr + debugapi.VirtualServersPath
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("request %s: %w", url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("ask the kipvs daemon (is kipvs run serving metrics on %s?): %w", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound && resp.Header.Get(debugapi.DebugHeader) == debugapi.DebugDisabled {
		return nil, fmt.Errorf("GET %s: kipvs on %s serves no Service owners (its debug endpoints are off, the default): %s", url, addr, debugapi.DebugDisabledHint)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	var list debugapi.VirtualServerList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, fmt.Errorf("decode %s: %w", url, err)
	}
	return ownersFromList(list)
}

// ownersFromList indexes the daemon's virtual servers by IPVS service key.
func ownersFromList(list debugapi.VirtualServerList) (ipvsadm.Owners, error) {
	owners := ipvsadm.Owners{}
	for i, v := range list.Items {
		a, err := netip.ParseAddr(v.Address)
		if err != nil {
			return nil, fmt.Errorf("items[%d].address: %w", i, err)
		}
		var p inet.Protocol
		switch v.Protocol {
		case "TCP":
			p = inet.TCP
		case "UDP":
			p = inet.UDP
		case "SCTP":
			p = inet.SCTP
		default:
			return nil, fmt.Errorf("items[%d].protocol %q: want TCP, UDP or SCTP", i, v.Protocol)
		}
		k, err := ipvs.ServiceKey{Protocol: p, Addr: a, Port: v.Port}.Normalize()
		if err != nil {
			return nil, fmt.Errorf("items[%d]: %w", i, err)
		}
		owners[k] = append(owners[k], ipvsadm.Owner{Namespace: v.Namespace, Name: v.Name, Port: v.PortName, Kind: v.Kind})
	}
	return owners, nil
}
