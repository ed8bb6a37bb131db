package healthcheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"
)

// Service is one health check to serve.
type Service struct {
	Port           uint16
	LocalEndpoints int
}

// Listener opens a TCP listener (net.Listen in production; tests inject their own).
type Listener func(ctx context.Context, addr string) (net.Listener, error)

// Reporter receives a failure to open a health check port (the daemon turns it into a
// Warning Event on the Service).
type Reporter func(svc types.NamespacedName, reason, message string)

// Manager starts and stops one HTTP server per Service and answers with the current local
// endpoint count. It is safe for concurrent use.
type Manager struct {
	addrs   []string // listen addresses (IPs), "" host meaning all
	healthy func() bool
	listen  Listener
	report  Reporter
	log     *zap.Logger

	mu       sync.RWMutex
	services map[types.NamespacedName]*instance
}

type instance struct {
	port      uint16
	endpoints int
	servers   []*http.Server
}

// New returns a Manager listening on each of addrs (IP strings; nil or empty means all
// addresses). healthy reports whether the proxy itself is healthy.
func New(addrs []string, healthy func() bool, listen Listener, report Reporter, log *zap.Logger) *Manager {
	if len(addrs) == 0 {
		addrs = []string{""}
	}
	if listen == nil {
		listen = func(ctx context.Context, addr string) (net.Listener, error) {
			var lc net.ListenConfig
			return lc.Listen(ctx, "tcp", addr)
		}
	}
	if log == nil {
		log = zap.NewNop()
	}
	return &Manager{addrs: addrs, healthy: healthy, listen: listen, report: report, log: log,
		services: map[types.NamespacedName]*instance{}}
}

// SetAddrs sets the addresses (IP strings; nil or empty: all) the health checks opened from
// now on listen on. The daemon sets them once, before its first sync, from the node's
// addresses at start, as kube-proxy does.
func (m *Manager) SetAddrs(addrs []string) {
	if len(addrs) == 0 {
		addrs = []string{""}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.addrs = slices.Clone(addrs)
}

// Sync makes the served health checks exactly want: new ones are opened, gone or re-ported
// ones closed, and endpoint counts updated. A port that cannot be opened (another process
// holds it) is reported and skipped; the next Sync retries it.
func (m *Manager) Sync(ctx context.Context, want map[types.NamespacedName]Service) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, inst := range m.services {
		if w, ok := want[name]; !ok || w.Port != inst.port {
			m.log.Info("closing health check", zap.Stringer("service", name), zap.Uint16("port", inst.port))
			inst.close()
			delete(m.services, name)
		}
	}
	for name, w := range want {
		if inst, ok := m.services[name]; ok {
			inst.endpoints = w.LocalEndpoints
			continue
		}
		inst := &instance{port: w.Port, endpoints: w.LocalEndpoints}
		if err := m.open(ctx, name, inst); err != nil {
			msg := fmt.Sprintf("failed to start the health check of %s on port %d: %v", name, w.Port, err)
			m.log.Warn("health check port unavailable", zap.Stringer("service", name), zap.Uint16("port", w.Port), zap.Error(err))
			if m.report != nil {
				m.report(name, "FailedToStartServiceHealthcheck", msg)
			}
			continue
		}
		m.log.Info("opened health check", zap.Stringer("service", name), zap.Uint16("port", w.Port))
		m.services[name] = inst
	}
}

func (m *Manager) open(ctx context.Context, name types.NamespacedName, inst *instance) error {
	for _, ip := range m.addrs {
		ln, err := m.listen(ctx, net.JoinHostPort(ip, strconv.Itoa(int(inst.port))))
		if err != nil {
			inst.close()
			return err
		}
		srv := &http.Server{Handler: m.handler(name), ReadHeaderTimeout: 10 * time.Second}
		inst.servers = append(inst.servers, srv)
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				m.log.Warn("health check server stopped", zap.Stringer("service", name), zap.Error(err))
			}
		}()
	}
	return nil
}

func (inst *instance) close() {
	for _, s := range inst.servers {
		_ = s.Close()
	}
	inst.servers = nil
}

// Close stops every server.
func (m *Manager) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, inst := range m.services {
		inst.close()
		delete(m.services, name)
	}
}

// Ports returns the open health check ports by Service (for tests and status).
func (m *Manager) Ports() map[types.NamespacedName]uint16 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := map[types.NamespacedName]uint16{}
	for n, i := range m.services {
		out[n] = i.port
	}
	return out
}

type body struct {
	Service struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"service"`
	LocalEndpoints      int  `json:"localEndpoints"`
	ServiceProxyHealthy bool `json:"serviceProxyHealthy"`
}

func (m *Manager) handler(name types.NamespacedName) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		m.mu.RLock()
		inst, ok := m.services[name]
		count := 0
		if ok {
			count = inst.endpoints
		}
		m.mu.RUnlock()
		healthy := m.healthy == nil || m.healthy()
		var b body
		b.Service.Namespace, b.Service.Name = name.Namespace, name.Name
		b.LocalEndpoints, b.ServiceProxyHealthy = count, healthy
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("X-Load-Balancing-Endpoint-Weight", strconv.Itoa(count))
		if count > 0 && healthy {
			w.WriteHeader(http.StatusOK)
		} else {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		out, _ := json.MarshalIndent(b, "", "\t")
		_, _ = w.Write(out)
	})
}
