package ipvsadm

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/kerr"
)

// Reader is the part of the IPVS adapter a status run reads; *ipvs.Client implements it.
type Reader interface {
	Info() (ipvs.Info, error)
	Timeouts() (ipvs.Timeouts, error)
	TableKernelOrder() ([]ipvs.Entry, error)
	EntryKernelOrder(k ipvs.ServiceKey) (ipvs.Entry, error)
}

var _ Reader = (*ipvs.Client)(nil)

// Env is everything a status run reads.
type Env struct {
	IPVS Reader
	// OpenConns opens the connection table (default: ConnFile).
	OpenConns func() (io.ReadCloser, error)
	// Owners returns the virtual server owners of the daemon at a metrics address
	// (needed for --services only).
	Owners func(metricsAddress string) (Owners, error)
}

// ErrNoSuchService is ipvsadm's message for a -t/-u/--sctp-service/-f service that does
// not exist.
var ErrNoSuchService = errors.New("No such service")

// Run reads what o asks for and writes it to w.
func Run(w io.Writer, o Options, env Env) error {
	if o.Connections {
		return runConns(w, o, env)
	}
	if o.Timeout {
		t, err := env.IPVS.Timeouts()
		if err != nil {
			return fmt.Errorf("read IPVS timeouts: %w", err)
		}
		if o.Output == "json" {
			return writeJSON(w, JSONTimeouts{TCP: t.TCP, TCPFin: t.TCPFin, UDP: t.UDP})
		}
		return writeTimeouts(w, t)
	}
	var owners Owners
	if o.Owners {
		if env.Owners == nil {
			return errors.New("--services: no daemon client")
		}
		var err error
		if owners, err = env.Owners(o.MetricsAddress); err != nil {
			return fmt.Errorf("--services: %w", err)
		}
	}
	snap, err := read(o, env.IPVS)
	if err != nil {
		return err
	}
	if o.Output == "json" {
		return writeJSON(w, tableJSON(o, snap, owners))
	}
	return WriteList(w, o, snap, owners)
}

// read takes the snapshot o needs: IPVS info and the whole table, or one service.
func read(o Options, r Reader) (Snapshot, error) {
	var s Snapshot
	info, err := r.Info()
	if err != nil {
		return s, fmt.Errorf("read IPVS info (is the ip_vs module loaded?): %w", err)
	}
	s.Info = info
	if o.Service != nil && o.Command == List {
		e, err := r.EntryKernelOrder(*o.Service)
		if kerr.IsNotFound(err) {
			return s, ErrNoSuchService
		}
		if err != nil {
			return s, fmt.Errorf("read IPVS service %s: %w", o.Service, err)
		}
		s.Entries, s.Single = []ipvs.Entry{e}, true
		return s, nil
	}
	if s.Entries, err = r.TableKernelOrder(); err != nil {
		return s, fmt.Errorf("read the IPVS table: %w", err)
	}
	return s, nil
}

func runConns(w io.Writer, o Options, env Env) error {
	open := env.OpenConns
	if open == nil {
		open = func() (io.ReadCloser, error) { return os.Open(ConnFile) }
	}
	f, err := open()
	if err != nil {
		return fmt.Errorf("cannot open file %s: %w", ConnFile, err)
	}
	defer f.Close()
	conns, err := readConns(f)
	if err != nil {
		return err
	}
	if o.Output == "json" {
		if conns == nil {
			conns = []Conn{}
		}
		return writeJSON(w, JSONConns{Connections: conns})
	}
	return writeConns(w, o, conns)
}
