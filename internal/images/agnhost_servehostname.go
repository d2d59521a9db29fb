package images

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"
)

// agnhostServeHostname is agnhost's serve-hostname: it answers the pod's
// hostname, without a newline, on --port (9376): over HTTP (--http, the
// default; --close adds "Connection: close"), or over raw TCP (written
// on accepting, then closed) and UDP (a datagram for each one received)
// with --http=false --tcp --udp. After SIGTERM it goes on serving until
// the pod is deleted (a minute at most), as agnhost does.
func agnhostServeHostname(ctx context.Context, env *agnhostEnv, args []string) error {
	fs := agnhostFlagSet(env, "serve-hostname")
	doTCP := fs.Bool("tcp", false, "serve raw over TCP")
	doUDP := fs.Bool("udp", false, "serve raw over UDP")
	doHTTP := fs.Bool("http", true, "serve HTTP")
	doClose := fs.Bool("close", false, "close the connection after each HTTP request")
	port := fs.Int("port", 9376, "port number")
	if _, err := parseAgnhostFlags(fs, args, 0); err != nil {
		return err
	}
	if *doHTTP && (*doTCP || *doUDP) {
		return errors.New("serve-hostname: Can't server TCP/UDP mode and HTTP mode at the same time")
	}
	name, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("serve-hostname: %w", err)
	}
	logger := env.logger()
	addr := env.addr("", strconv.Itoa(*port))
	failed := make(chan error, 3)
	var open closers
	defer open.closeAll()
	if *doTCP {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("serve-hostname: %w", err)
		}
		open = append(open, l)
		env.announce("tcp", l.Addr())
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					failed <- err
					return
				}
				logger.Printf("TCP request from %s", c.RemoteAddr())
				c.Write([]byte(name))
				c.Close()
			}
		}()
	}
	if *doUDP {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return fmt.Errorf("serve-hostname: %w", err)
		}
		open = append(open, pc)
		env.announce("udp", pc.LocalAddr())
		go func() {
			buf := make([]byte, 16)
			for {
				_, from, err := pc.ReadFrom(buf)
				if err != nil {
					failed <- err
					return
				}
				logger.Printf("UDP request from %s", from)
				pc.WriteTo([]byte(name), from)
			}
		}()
	}
	if *doHTTP {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("serve-hostname: %w", err)
		}
		env.announce("http", l.Addr())
		srv := &http.Server{ErrorLog: logger, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			logger.Printf("HTTP request from %s", r.RemoteAddr)
			if *doClose {
				w.Header().Add("Connection", "close")
			}
			io.WriteString(w, name)
		})}
		open = append(open, srv)
		go func() { failed <- srv.Serve(l) }()
	}
	logger.Printf("Serving on port %d.", *port)
	select {
	case err := <-failed:
		return fmt.Errorf("serve-hostname: %w", err)
	case <-ctx.Done():
	}
	logger.Printf("Shutting down after receiving signal: terminated.")
	logger.Printf("Awaiting pod deletion.")
	select {
	case err := <-failed:
		return fmt.Errorf("serve-hostname: %w", err)
	case <-time.After(env.linger):
	}
	return nil
}
