package images

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
)

// agnhostPorter is agnhost's porter: for each environment variable
//
//	SERVE_PORT_N, SERVE_TCP_PORT_N  HTTP on port N
//	SERVE_TLS_PORT_N                HTTPS on port N
//	SERVE_UDP_PORT_N                UDP on port N
//
// it answers every request on N with the variable's value, or with
// --json-response {"Method": the request's method, "Body": the value}.
// HTTPS uses $CERT_FILE and $KEY_FILE when set, else a certificate for
// localhost, 127.0.0.1 and ::1 made at start (agnhost ships one such).
// Servers listen on IPv4's wildcard address, as agnhost's. A port an
// HTTP server cannot listen on is logged and skipped; a UDP one ends
// porter. SERVE_SCTP_PORT_N fails: SCTP is not supported.
func agnhostPorter(ctx context.Context, env *agnhostEnv, args []string) error {
	fs := agnhostFlagSet(env, "porter")
	jsonResponse := fs.Bool("json-response", false, "answer JSON with the request's method and the value")
	if _, err := parseAgnhostFlags(fs, args, 0); err != nil {
		return err
	}
	logger := env.logger()
	var open closers
	defer open.closeAll()
	for _, kv := range os.Environ() {
		key, value, _ := strings.Cut(kv, "=")
		var kind, port string
		for _, prefix := range []string{"SERVE_PORT_", "SERVE_TCP_PORT_", "SERVE_UDP_PORT_", "SERVE_SCTP_PORT_", "SERVE_TLS_PORT_"} {
			if p, ok := strings.CutPrefix(key, prefix); ok {
				kind, port = prefix, p
				break
			}
		}
		addr := env.addr("0.0.0.0", port)
		switch kind {
		case "SERVE_PORT_", "SERVE_TCP_PORT_", "SERVE_TLS_PORT_":
			var tlsConfig *tls.Config
			if kind == "SERVE_TLS_PORT_" {
				cert, err := porterCertificate()
				if err != nil {
					logger.Printf("tls server on port %q failed: %v", port, err)
					continue
				}
				tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}}
			}
			l, err := net.Listen("tcp", addr)
			if err != nil {
				logger.Printf("server on port %q failed: %v", port, err)
				continue
			}
			env.announce(key, l.Addr())
			if tlsConfig != nil {
				l = tls.NewListener(l, tlsConfig)
			}
			srv := &http.Server{Handler: porterHandler(value, *jsonResponse), ErrorLog: logger}
			open = append(open, srv)
			go func() { logger.Printf("server on port %q stopped: %v", port, srv.Serve(l)) }()
		case "SERVE_UDP_PORT_":
			pc, err := net.ListenPacket("udp", addr)
			if err != nil {
				return fmt.Errorf("porter: UDP: failed to listen on port %s: %w", port, err)
			}
			open = append(open, pc)
			env.announce(key, pc.LocalAddr())
			logger.Printf("Started UDP server on port %s", port)
			go porterUDP(pc, value, logger)
		case "SERVE_SCTP_PORT_":
			return fmt.Errorf("porter: %s: %w", key, errSCTP)
		}
	}
	<-ctx.Done()
	return nil
}

func porterHandler(value string, jsonResponse bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !jsonResponse {
			io.WriteString(w, value)
			return
		}
		b, err := json.Marshal(struct{ Method, Body string }{r.Method, value})
		if err != nil {
			http.Error(w, fmt.Sprintf("Internal Server Error: %v", err), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	})
}

// porterUDP answers each datagram on pc with value.
func porterUDP(pc net.PacketConn, value string, logger *log.Logger) {
	buf := make([]byte, 16)
	for {
		_, from, err := pc.ReadFrom(buf)
		if err != nil {
			logger.Printf("UDP: error from ReadFrom(): %v", err)
			return
		}
		go func() {
			if _, err := pc.WriteTo([]byte(value), from); err != nil {
				logger.Printf("UDP: error from WriteTo(): %v", err)
			}
		}()
	}
}

// porterCertificate is HTTPS's certificate: $CERT_FILE and $KEY_FILE,
// or one made for localhost.
func porterCertificate() (tls.Certificate, error) {
	certFile, keyFile := os.Getenv("CERT_FILE"), os.Getenv("KEY_FILE")
	if certFile == "" && keyFile == "" {
		return localhostCertificate()
	}
	if certFile == "" {
		certFile = "localhost.crt"
	}
	if keyFile == "" {
		keyFile = "localhost.key"
	}
	return tls.LoadX509KeyPair(certFile, keyFile)
}
