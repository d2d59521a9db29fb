package healthcheck

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Listener opens the socket of a health-check node port. The real one
// listens on every address of the namespace the proxy runs in; tests
// listen on loopback.
type Listener interface {
	Listen(port int) (net.Listener, error)
}

// ListenFunc adapts a function to Listener.
type ListenFunc func(port int) (net.Listener, error)

// Listen implements Listener.
func (f ListenFunc) Listen(port int) (net.Listener, error) { return f(port) }

// AllAddresses listens on port on every address, as kube-proxy does
// without --nodeport-addresses.
var AllAddresses = ListenFunc(func(port int) (net.Listener, error) {
	return net.Listen("tcp", ":"+strconv.Itoa(port))
})

// Loopback is the Listener of tests: it opens each health-check port on
// 127.0.0.1 at a port the system picks, and remembers where, so a test
// reaches node port N at Addr(N) without the right to bind N. The zero
// value is ready to use.
type Loopback struct {
	mu    sync.Mutex
	addrs map[int]string
}

// Listen implements Listener.
func (l *Loopback) Listen(port int) (net.Listener, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err == nil {
		l.mu.Lock()
		if l.addrs == nil {
			l.addrs = map[int]string{}
		}
		l.addrs[port] = ln.Addr().String()
		l.mu.Unlock()
	}
	return ln, err
}

// Addr is where port listens: "" until it does.
func (l *Loopback) Addr(port int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.addrs[port]
}

// Service is what a health-check node port reports.
type Service struct {
	Port           int
	LocalEndpoints int
}

// Services runs one HTTP server per health-check node port.
type Services struct {
	listener Listener
	proxy    *ProxyHealth // nil: the proxy counts as healthy
	logger   *slog.Logger

	mu      sync.Mutex
	servers map[types.NamespacedName]*hcServer
}

type hcServer struct {
	name  types.NamespacedName
	port  int
	srv   *http.Server
	mu    sync.Mutex
	count int
}

// NewServices returns a Services that opens ports through l. Its
// responses say the proxy is unhealthy when proxy does.
func NewServices(l Listener, proxy *ProxyHealth, logger *slog.Logger) *Services {
	if logger == nil {
		logger = slog.Default()
	}
	return &Services{listener: l, proxy: proxy, logger: logger, servers: map[types.NamespacedName]*hcServer{}}
}

// Sync makes the servers match want: opens new ports, closes ports of
// services that no longer need one, updates endpoint counts. A port that
// cannot be opened is reported and retried at the next Sync; the others
// are served regardless.
func (s *Services) Sync(want map[types.NamespacedName]Service) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var failed []error
	for name, srv := range s.servers {
		if w, ok := want[name]; !ok || w.Port != srv.port {
			_ = srv.srv.Close()
			delete(s.servers, name)
			s.logger.Info("closed health-check node port", "service", name.String(), "port", srv.port)
		}
	}
	for _, name := range slices.SortedFunc(maps.Keys(want), func(a, b types.NamespacedName) int {
		return compareNames(a, b)
	}) {
		w := want[name]
		srv := s.servers[name]
		if srv == nil {
			l, err := s.listener.Listen(w.Port)
			if err != nil {
				failed = append(failed, fmt.Errorf("health-check node port %d of %s: %w", w.Port, name, err))
				continue
			}
			srv = &hcServer{name: name, port: w.Port}
			srv.srv = &http.Server{Handler: s.handler(srv), ReadHeaderTimeout: 10 * time.Second}
			go func() {
				if err := srv.srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
					s.logger.Warn("health-check node port stopped", "service", name.String(), "port", w.Port, "err", err)
				}
			}()
			s.servers[name] = srv
			s.logger.Info("opened health-check node port", "service", name.String(), "port", w.Port)
		}
		srv.mu.Lock()
		if srv.count != w.LocalEndpoints {
			s.logger.Info("health check: local endpoints changed", "service", name.String(), "from", srv.count, "to", w.LocalEndpoints)
		}
		srv.count = w.LocalEndpoints
		srv.mu.Unlock()
	}
	return errors.Join(failed...)
}

// Close stops every server.
func (s *Services) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, srv := range s.servers {
		_ = srv.srv.Shutdown(context.Background())
		delete(s.servers, name)
	}
}

// Ports returns the ports served, by service.
func (s *Services) Ports() map[types.NamespacedName]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[types.NamespacedName]int{}
	for n, srv := range s.servers {
		out[n] = srv.port
	}
	return out
}

// handler answers as kube-proxy's health-check node ports do: 200 when
// this node has local endpoints (and the proxy is healthy), 503 when
// not, so that a load balancer sends only to nodes that keep the
// client's address and still reach a pod.
func (s *Services) handler(srv *hcServer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		srv.mu.Lock()
		count := srv.count
		srv.mu.Unlock()
		healthy := true
		if s.proxy != nil {
			healthy, _ = s.proxy.Healthy()
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("X-Load-Balancing-Endpoint-Weight", strconv.Itoa(count))
		if count > 0 && healthy {
			w.WriteHeader(http.StatusOK)
		} else {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		fmt.Fprintf(w, "{\n\t\"service\": {\n\t\t\"namespace\": %q,\n\t\t\"name\": %q\n\t},\n\t\"localEndpoints\": %d,\n\t\"serviceProxyHealthy\": %v\n}",
			srv.name.Namespace, srv.name.Name, count, healthy)
	})
}

func compareNames(a, b types.NamespacedName) int {
	if a.Namespace != b.Namespace {
		if a.Namespace < b.Namespace {
			return -1
		}
		return 1
	}
	switch {
	case a.Name < b.Name:
		return -1
	case a.Name > b.Name:
		return 1
	}
	return 0
}
