package node

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
)

// Link is the host end of the node's network: a tap device the VM's NIC is attached to, with
// a private subnet of its own. Traffic goes only between the host and the VM: the VM gets no
// default route, the host routes only the pod CIDR to the node, and nothing is forwarded or
// NATed to the outside (the host's net.ipv4.ip_forward is left as it is; with it on, Up
// adds iptables FORWARD drops for the tap, removed by Down).
type Link struct {
	Tap     string
	HostIP  net.IP
	Prefix  int
	Routes  []string // CIDRs routed to the node (the pod CIDR), via NodeIP
	NodeIP  net.IP
	dropped bool // FORWARD drop rules added
}

func ip(args ...string) error {
	var out bytes.Buffer
	cmd := exec.Command("ip", args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out.Bytes()))
	}
	return nil
}

// Up creates the tap (failing when it exists: another run holds it, or a crashed one left
// it; `ip link del TAP` removes it) and addresses the host's end. On error it removes what
// it made.
func (l *Link) Up() (err error) {
	if _, err := net.InterfaceByName(l.Tap); err == nil {
		return fmt.Errorf("tap %s already exists: another node run holds it, or a crashed one left it (remove it with: ip link del %s)", l.Tap, l.Tap)
	}
	if err := ip("tuntap", "add", "dev", l.Tap, "mode", "tap"); err != nil {
		return fmt.Errorf("create tap %s (needs root and /dev/net/tun): %w", l.Tap, err)
	}
	defer func() {
		if err != nil {
			l.Down()
		}
	}()
	if err := ip("addr", "add", fmt.Sprintf("%s/%d", l.HostIP, l.Prefix), "dev", l.Tap); err != nil {
		return err
	}
	if err := ip("link", "set", l.Tap, "up"); err != nil {
		return err
	}
	for _, r := range l.Routes {
		if err := ip("route", "add", r, "via", l.NodeIP.String(), "dev", l.Tap); err != nil {
			if strings.Contains(err.Error(), "File exists") {
				return fmt.Errorf("%w: the route to %s is taken, by another node run (ip route show %s) or one that crashed (ip route del %s)", err, r, r, r)
			}
			return err
		}
	}
	if b, _ := os.ReadFile("/proc/sys/net/ipv4/ip_forward"); strings.TrimSpace(string(b)) == "1" {
		for _, dir := range []string{"-i", "-o"} {
			if err := iptables("-I", "FORWARD", dir, l.Tap, "-j", "DROP"); err != nil {
				return fmt.Errorf("the host forwards IPv4 and the tap's FORWARD drop failed: %w", err)
			}
			l.dropped = true
		}
	}
	return nil
}

// Down removes the tap (its addresses and routes go with it) and the FORWARD drops.
func (l *Link) Down() {
	if l.dropped {
		for _, dir := range []string{"-i", "-o"} {
			_ = iptables("-D", "FORWARD", dir, l.Tap, "-j", "DROP")
		}
		l.dropped = false
	}
	_ = ip("link", "del", l.Tap)
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
