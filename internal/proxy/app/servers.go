package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/svcnet/svcnet/internal/proxy/healthcheck"
)

// serveMetrics answers /metrics, /healthz and /proxyMode on addr, as
// kube-proxy's metrics server does.
func serveMetrics(ctx context.Context, addr string, reg *prometheus.Registry, health *healthcheck.ProxyHealth, mode string, errCh chan<- error) error {
	if addr == "" {
		return nil
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("/healthz", health)
	mux.HandleFunc("/proxyMode", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = fmt.Fprint(w, mode)
	})
	return serve(ctx, "metrics", addr, mux, errCh)
}

// serveHealthz answers /healthz and /livez on addr: what load balancers
// and the node agent probe.
func serveHealthz(ctx context.Context, addr string, health *healthcheck.ProxyHealth, errCh chan<- error) error {
	if addr == "" {
		return nil
	}
	mux := http.NewServeMux()
	mux.Handle("/healthz", health)
	mux.Handle("/livez", health)
	return serve(ctx, "healthz", addr, mux, errCh)
}

func serve(ctx context.Context, what, addr string, h http.Handler, errCh chan<- error) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("serve %s on %s: %w", what, addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errCh <- fmt.Errorf("%s server: %w", what, err)
		}
	}()
	go func() { <-ctx.Done(); _ = srv.Close() }()
	return nil
}
