package images

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"
)

// runHostnames answers every HTTP request with the pod's name, like the
// serve-hostname server of the reference documents.
func runHostnames(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("hostnames", flag.ContinueOnError)
	port := fs.Int("port", 9376, "HTTP port")
	delay := fs.Int("delay-shutdown", 0, "seconds to keep serving after SIGTERM (as agnhost netexec's flag)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx = delayedDone(ctx, time.Duration(*delay)*time.Second)
	name, err := os.Hostname()
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, name)
	})
	return serveHTTP(ctx, fmt.Sprintf(":%d", *port), mux)
}

func serveHTTP(ctx context.Context, addr string, h http.Handler) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// delayedDone ends d after ctx does: a server that keeps serving for a
// while after SIGTERM, as a well-behaved one does while the proxies stop
// sending it new connections.
func delayedDone(ctx context.Context, d time.Duration) context.Context {
	if d <= 0 {
		return ctx
	}
	out, cancel := context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		<-ctx.Done()
		time.Sleep(d)
		cancel()
	}()
	return out
}
