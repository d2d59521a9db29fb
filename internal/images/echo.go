package images

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// runEcho is an HTTP, TCP and UDP echo server for tests, in the spirit of
// agnhost netexec:
//
//	HTTP /hostname   the pod's name
//	HTTP /clientip   the address the request came from (host:port)
//	HTTP /echo?msg=  msg
//	HTTP /readyz     200, or 503 after /set-ready?ready=false
//	TCP              echoes what it reads
//	UDP              "hostname" and "clientip" as above, anything else echoed
func runEcho(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("echo", flag.ContinueOnError)
	httpPort := fs.Int("http-port", 8080, "HTTP port (0: none)")
	tcpPort := fs.Int("tcp-port", 8081, "TCP echo port (0: none)")
	udpPort := fs.Int("udp-port", 8082, "UDP echo port (0: none)")
	delay := fs.Int("delay-shutdown", 0, "seconds to keep serving after SIGTERM")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx = delayedDone(ctx, time.Duration(*delay)*time.Second)
	name, _ := os.Hostname()
	var unready atomic.Bool
	errCh := make(chan error, 3)
	if *tcpPort != 0 {
		l, err := net.Listen("tcp", fmt.Sprintf(":%d", *tcpPort))
		if err != nil {
			return err
		}
		go func() { <-ctx.Done(); l.Close() }()
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					errCh <- nil
					return
				}
				go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
			}
		}()
	}
	if *udpPort != 0 {
		pc, err := net.ListenPacket("udp", fmt.Sprintf(":%d", *udpPort))
		if err != nil {
			return err
		}
		go func() { <-ctx.Done(); pc.Close() }()
		go func() {
			buf := make([]byte, 65535)
			for {
				n, from, err := pc.ReadFrom(buf)
				if err != nil {
					errCh <- nil
					return
				}
				msg := strings.TrimSpace(string(buf[:n]))
				reply := buf[:n]
				switch msg {
				case "hostname":
					reply = []byte(name)
				case "clientip":
					reply = []byte(from.String())
				}
				_, _ = pc.WriteTo(reply, from)
			}
		}()
	}
	if *httpPort != 0 {
		mux := http.NewServeMux()
		mux.HandleFunc("/hostname", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, name) })
		mux.HandleFunc("/clientip", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, r.RemoteAddr) })
		mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, r.URL.Query().Get("msg")) })
		mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
			if unready.Load() {
				http.Error(w, "not ready", http.StatusServiceUnavailable)
				return
			}
			fmt.Fprint(w, "ok")
		})
		mux.HandleFunc("/set-ready", func(w http.ResponseWriter, r *http.Request) {
			unready.Store(r.URL.Query().Get("ready") == "false")
			fmt.Fprintf(w, "ready=%v", !unready.Load())
		})
		go func() { errCh <- serveHTTP(ctx, fmt.Sprintf(":%d", *httpPort), mux) }()
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-errCh:
		if err != nil {
			return err
		}
		return errors.New("echo server stopped")
	}
}
