package node

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
)

// Link is the host end of the nodes' network, a private subnet of its own. With one node it
// is the tap device the VM's NIC is attached to; with more, a bridge the nodes' taps join, so
// the nodes reach one another at layer 2 without the host routing anything between them.
// Traffic goes only between the host and the VMs: the VMs get no default route, the host
// routes only each node's pod CIDR to its node, and nothing is forwarded or NATed to the
// outside (the host's net.ipv4.ip_forward is left as it is; with it on, Up adds iptables
// FORWARD drops for whatever the host would route into or out of the link, removed by Down).
type Link struct {
	Name    string   // the tap itself with one node, else the bridge; carries HostIP
	Taps    []string // one per node, in node order; [Name] with one node
	HostIP  net.IP
	Prefix  int
	Routes  []Route // each node's pod CIDR via its address
	dropped bool    // FORWARD drop rules added
}

// Route is one CIDR the host routes to a node.
type Route struct {
	CIDR string
	Via  net.IP
}

func (l *Link) bridged() bool { return len(l.Taps) != 1 || l.Taps[0] != l.Name }

func ip(args ...string) error {
	var out bytes.Buffer
	cmd := exec.Command("ip", args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out.Bytes()))
	}
	return nil
}

// Up creates the link (failing when one of its devices exists: another run holds it, or a
// crashed one left it; `ip link del NAME` removes it) and addresses the host's end. On error
// it removes what it made.
func (l *Link) Up() (err error) {
	devices := l.Taps
	if l.bridged() {
		devices = append([]string{l.Name}, l.Taps...)
	}
	for _, d := range devices {
		if _, err := net.InterfaceByName(d); err == nil {
			return fmt.Errorf("device %s already exists: another node run holds it, or a crashed one left it (remove it with: ip link del %s)", d, d)
		}
	}
	defer func() {
		if err != nil {
			l.Down()
		}
	}()
	if l.bridged() {
		if err := ip("link", "add", l.Name, "type", "bridge"); err != nil {
			return fmt.Errorf("create bridge %s (needs root and the bridge module): %w", l.Name, err)
		}
	}
	for _, t := range l.Taps {
		if err := ip("tuntap", "add", "dev", t, "mode", "tap"); err != nil {
			return fmt.Errorf("create tap %s (needs root and /dev/net/tun): %w", t, err)
		}
		if l.bridged() {
			if err := ip("link", "set", t, "master", l.Name); err != nil {
				return err
			}
			if err := ip("link", "set", t, "up"); err != nil {
				return err
			}
		}
	}
	if err := ip("addr", "add", fmt.Sprintf("%s/%d", l.HostIP, l.Prefix), "dev", l.Name); err != nil {
		return err
	}
	if err := ip("link", "set", l.Name, "up"); err != nil {
		return err
	}
	for _, r := range l.Routes {
		if err := ip("route", "add", r.CIDR, "via", r.Via.String(), "dev", l.Name); err != nil {
			if strings.Contains(err.Error(), "File exists") {
				return fmt.Errorf("%w: the route to %s is taken, by another node run (ip route show %s) or one that crashed (ip route del %s)", err, r.CIDR, r.CIDR, r.CIDR)
			}
			return err
		}
	}
	if b, _ := os.ReadFile("/proc/sys/net/ipv4/ip_forward"); strings.TrimSpace(string(b)) == "1" {
		for _, rule := range l.forwardDrops() {
			if err := iptables(append([]string{"-I"}, rule...)...); err != nil {
				return fmt.Errorf("the host forwards IPv4 and the link's FORWARD drop failed: %w", err)
			}
			l.dropped = true
		}
	}
	return nil
}

// forwardDrops are the FORWARD rules that keep the host from routing into or out of the
// link; frames bridged between the nodes (in and out on the bridge) still pass.
func (l *Link) forwardDrops() [][]string {
	return [][]string{
		{"FORWARD", "-i", l.Name, "!", "-o", l.Name, "-j", "DROP"},
		{"FORWARD", "!", "-i", l.Name, "-o", l.Name, "-j", "DROP"},
	}
}

// Down removes the taps, the bridge (the addresses and routes go with them) and the FORWARD
// drops.
func (l *Link) Down() {
	if l.dropped {
		for _, rule := range l.forwardDrops() {
			_ = iptables(append([]string{"-D"}, rule...)...)
		}
		l.dropped = false
	}
	for _, t := range l.Taps {
		_ = ip("link", "del", t)
	}
	if l.bridged() {
		_ = ip("link", "del", l.Name)
	}
}

func iptables(args ...string) error {
	var out bytes.Buffer
	cmd := exec.Command("iptables", append([]string{"-w", "5"}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("iptables %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out.Bytes()))
	}
	return nil
}
