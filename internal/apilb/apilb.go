// Package apilb is the load balancer in front of several API servers, as
// kubeadm's high-availability topology puts HAProxy there: TCP passed
// through (TLS ends at the API servers, client certificates included),
// each backend health-checked over HTTPS /readyz, new connections to a
// ready backend in turn, a connection whose backend refuses it tried on
// the next one.
package apilb

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"
)

// Health is the state of the backends: the pure core, fed by checks and
// dial results.
type Health struct {
	mu       sync.Mutex
	backends []string
	up       []bool
	fails    []int
	next     int
	// Fall is how many failed checks in a row take a backend out; one
	// refused connection does at once (a dead process refuses).
	Fall int
}

// NewHealth starts with every backend out, until a check passes.
func NewHealth(backends []string) *Health {
	return &Health{backends: backends, up: make([]bool, len(backends)), fails: make([]int, len(backends)), Fall: 2}
}

// Checked records a health check's result.
func (h *Health) Checked(i int, ok bool) (changed bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	was := h.up[i]
	if ok {
		h.fails[i] = 0
		h.up[i] = true
	} else {
		h.fails[i]++
		if h.fails[i] >= h.Fall {
			h.up[i] = false
		}
	}
	return was != h.up[i]
}

// Refused takes a backend out at once: its port refused a connection.
func (h *Health) Refused(i int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.up[i], h.fails[i] = false, h.Fall
}

// Pick returns the backends to try for a new connection, the next
// ready one first (round robin), then the other ready ones; none when no
// backend is ready.
func (h *Health) Pick() []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []int
	n := len(h.backends)
	for k := range n {
		i := (h.next + k) % n
		if h.up[i] {
			out = append(out, i)
		}
	}
	h.next = (h.next + 1) % max(n, 1)
	return out
}

// Up lists the ready backends.
func (h *Health) Up() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for i, b := range h.backends {
		if h.up[i] {
			out = append(out, b)
		}
	}
	return out
}

// Balancer serves a listener.
type Balancer struct {
	Backends []string
	// TLS verifies the backends' /readyz (their CA).
	TLS      *tls.Config
	Interval time.Duration
	health   *Health
}

// New is a balancer over backends (host:port), checking each every
// interval with tlsConfig.
func New(backends []string, tlsConfig *tls.Config, interval time.Duration) (*Balancer, error) {
	if len(backends) == 0 {
		return nil, errors.New("apilb: no backends")
	}
	if interval <= 0 {
		interval = time.Second
	}
	return &Balancer{Backends: backends, TLS: tlsConfig, Interval: interval, health: NewHealth(backends)}, nil
}

// Ready lists the backends that pass their checks.
func (b *Balancer) Ready() []string { return b.health.Up() }

// Run checks the backends and passes every connection of l to a ready
// one until ctx ends.
func (b *Balancer) Run(ctx context.Context, l net.Listener) error {
	interval := b.Interval
	// The check waits longer than its period: a slow answer is not a dead
	// server (checks run one after the other).
	hc := &http.Client{Timeout: max(interval, 2*time.Second), Transport: &http.Transport{TLSClientConfig: b.TLS, DisableKeepAlives: true}}
	for i, be := range b.Backends {
		go b.check(ctx, hc, i, be, interval)
	}
	return accept(ctx, l, func(c net.Conn) { b.serve(ctx, c) })
}

func (b *Balancer) check(ctx context.Context, hc *http.Client, i int, backend string, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		ok := false
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+backend+"/readyz", nil)
		if err != nil {
			return
		}
		resp, err := hc.Do(req)
		if err == nil {
			ok = resp.StatusCode == http.StatusOK
			resp.Body.Close()
		}
		if b.health.Checked(i, ok) {
			slog.Info("API server health changed", "backend", backend, "ready", ok, "ready backends", b.health.Up())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (b *Balancer) serve(ctx context.Context, c net.Conn) {
	defer c.Close()
	var d net.Dialer
	for _, i := range b.health.Pick() {
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		up, err := d.DialContext(dctx, "tcp", b.Backends[i])
		cancel()
		if err != nil {
			// A refusal is a dead server: out at once. Other errors (a
			// timeout, the client gone) leave it to the checks.
			if errors.Is(err, syscall.ECONNREFUSED) {
				b.health.Refused(i)
				slog.Info("API server refused a connection; out until its next good check", "backend", b.Backends[i])
			}
			if ctx.Err() != nil {
				return
			}
			continue
		}
		splice(c, up)
		return
	}
}

// splice copies both ways; each direction's end is passed on (a half
// close, as TLS and HTTP/1.1 clients may send), and both connections
// close once both directions are done.
func splice(a, b net.Conn) {
	defer b.Close()
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	<-done
	<-done
}

// Forward passes every connection of l to what dial connects to, until
// ctx ends: the host's door to a balancer inside the cluster's
// namespaces.
func Forward(ctx context.Context, l net.Listener, dial func(context.Context) (net.Conn, error)) error {
	return accept(ctx, l, func(c net.Conn) {
		defer c.Close()
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		up, err := dial(dctx)
		cancel()
		if err != nil {
			slog.Info("forward: no connection", "err", err)
			return
		}
		splice(c, up)
	})
}

// accept hands every connection of l to serve, each in a goroutine of
// its own, until ctx ends (nil) or l fails.
func accept(ctx context.Context, l net.Listener, serve func(net.Conn)) error {
	go func() { <-ctx.Done(); l.Close() }()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		go serve(c)
	}
}
