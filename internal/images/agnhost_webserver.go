package images

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// agnhostTestWebserver is agnhost's test-webserver: the files of the
// pod's filesystem over HTTP on --port (80), a file's path being the
// URL's, with the CORS and caching headers agnhost sets and without
// If-Modified-Since's 304s.
func agnhostTestWebserver(ctx context.Context, env *agnhostEnv, args []string) error {
	fs := agnhostFlagSet(env, "test-webserver")
	port := fs.Int("port", 80, "port number")
	if _, err := parseAgnhostFlags(fs, args, 0); err != nil {
		return err
	}
	files := http.StripPrefix("/", http.FileServer(http.Dir(env.webRoot)))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "private")
		w.Header().Set("Access-Control-Allow-Origin", "*")
		w.Header().Set("Access-Control-Allow-Credentials", "true")
		w.Header().Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
		w.Header().Set("Access-Control-Allow-Headers", "DNT,X-Mx-ReqToken,Keep-Alive,User-Agent,X-Requested-With,Cache-Control,Content-Type")
		r.Header.Del("If-Modified-Since")
		files.ServeHTTP(w, r)
	})
	return agnhostServeHTTP(ctx, env, "http", env.addr("", strconv.Itoa(*port)), h)
}

// agnhostLiveness is agnhost's liveness: on port 8080, /healthz answers
// 200 "ok" for the first 10 seconds and 500 "error: SECONDS" after;
// /started answers the time since the start; /redirect?loc=L redirects
// (302) to L.
func agnhostLiveness(ctx context.Context, env *agnhostEnv, args []string) error {
	if _, err := parseAgnhostFlags(agnhostFlagSet(env, "liveness"), args, 0); err != nil {
		return err
	}
	return agnhostServeHTTP(ctx, env, "http", env.addr("", "8080"), livenessHandler(time.Now(), 10*time.Second))
}

func livenessHandler(started time.Time, healthy time.Duration) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/started", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
		fmt.Fprint(w, time.Since(started).String())
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if d := time.Since(started); d > healthy {
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprintf(w, "error: %v", d.Seconds())
			return
		}
		w.WriteHeader(http.StatusOK)
		fmt.Fprint(w, "ok")
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		loc, err := url.QueryUnescape(r.URL.Query().Get("loc"))
		if err != nil {
			http.Error(w, fmt.Sprintf("invalid redirect: %q", r.URL.Query().Get("loc")), http.StatusBadRequest)
			return
		}
		http.Redirect(w, r, loc, http.StatusFound)
	})
	return mux
}

// agnhostServeHTTP serves h on addr until ctx ends, then stops at once
// (agnhost's servers die with their process).
func agnhostServeHTTP(ctx context.Context, env *agnhostEnv, name, addr string, h http.Handler) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	env.announce(name, l.Addr())
	srv := &http.Server{Handler: h, ErrorLog: env.logger()}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
