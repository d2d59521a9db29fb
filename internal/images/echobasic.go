package images

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"
)

// runEchoBasic stands in for registry.k8s.io/gateway-api/echo-basic, the
// backend of the Gateway API conformance suite (v1.6.3 deploys tags
// v1.5.1, v1.6.0-dev.2 and v1.6.0-dev.3; they behave alike for the
// suite). The image takes no arguments: its container's environment
// picks one of four servers, as the suite's manifests set it:
//
//	GRPC_ECHO_SERVER  the gRPC echo service (echobasic_grpc.go)
//	TCP_ECHO_SERVER   the line-based TCP echo, plain and TLS (echobasic_tcp.go)
//	UDP_ECHO_SERVER   the UDP echo (echobasic_udp.go)
//	none of them      the HTTP echo: HTTP/1.1, h2c, HTTPS (echobasic_http.go)
//
// Every answer names the pod it came from (NAMESPACE, INGRESS_NAME,
// SERVICE_NAME, POD_NAME): the suite tells backends apart by them.
func runEchoBasic(ctx context.Context, _ []string) error {
	e := &echoBasic{getenv: os.Getenv, stdout: os.Stdout}
	return e.run(ctx)
}

// echoBasic is what the servers run with: the container's environment
// and standard output (the pod's log, which the suite reads), and, for
// tests, where the servers listen.
type echoBasic struct {
	getenv func(string) string
	stdout io.Writer
	// bindHost, when set, replaces the wildcard address the servers
	// listen on.
	bindHost string
	// listening, when set, learns each server's address once it
	// listens (tests use ports of 0 and find them here).
	listening func(name string, addr net.Addr)
}

// echoBasicPod says which backend answered; the HTTP, TCP and UDP
// answers carry it under these JSON names (the gRPC one in its Context
// message).
type echoBasicPod struct {
	Namespace string `json:"namespace"`
	Ingress   string `json:"ingress"`
	Service   string `json:"service"`
	Pod       string `json:"pod"`
}

func (e *echoBasic) pod() echoBasicPod {
	return echoBasicPod{
		Namespace: e.getenv("NAMESPACE"),
		Ingress:   e.getenv("INGRESS_NAME"),
		Service:   e.getenv("SERVICE_NAME"),
		Pod:       e.getenv("POD_NAME"),
	}
}

func (e *echoBasic) run(ctx context.Context) error {
	switch {
	case e.getenv("GRPC_ECHO_SERVER") != "":
		return e.serveGRPC(ctx)
	case e.getenv("TCP_ECHO_SERVER") != "":
		return e.serveTCP(ctx)
	case e.getenv("UDP_ECHO_SERVER") != "":
		return e.serveUDP(ctx)
	}
	return e.serveHTTP(ctx)
}

// port is the port the environment variable name sets, def without it.
func (e *echoBasic) port(name, def string) (string, error) {
	p := e.getenv(name)
	if p == "" {
		return def, nil
	}
	if _, err := strconv.ParseUint(p, 10, 16); err != nil {
		return "", fmt.Errorf("echo-basic: %s=%q is not a port", name, p)
	}
	return p, nil
}

// listen opens the TCP listener of the server called name.
func (e *echoBasic) listen(ctx context.Context, name, port string) (net.Listener, error) {
	l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", net.JoinHostPort(e.bindHost, port))
	if err != nil {
		return nil, fmt.Errorf("echo-basic: %s server: %w", name, err)
	}
	e.announce(name, l.Addr())
	return l, nil
}

func (e *echoBasic) announce(name string, a net.Addr) {
	e.logf("%s server listening on %s", name, a)
	if e.listening != nil {
		e.listening(name, a)
	}
}

// logf writes one line to the pod's log.
func (e *echoBasic) logf(format string, args ...any) {
	fmt.Fprintf(e.stdout, format+"\n", args...)
}

// keyPair reads the certificate and key files the environment names
// (certVar, keyVar): nil when either is unset, as echo-basic then serves
// no TLS.
func (e *echoBasic) keyPair(certVar, keyVar string) (*tls.Certificate, error) {
	certFile, keyFile := e.getenv(certVar), e.getenv(keyVar)
	if certFile == "" || keyFile == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("echo-basic: %s, %s: %w", certVar, keyVar, err)
	}
	return &cert, nil
}

// serveAll runs the servers until ctx ends (nil) or one of them fails
// (its error); then it stops the others and waits for them.
func serveAll(ctx context.Context, servers ...func(ctx context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(servers))
	for _, serve := range servers {
		go func() { errs <- serve(ctx) }()
	}
	var first error
	for range servers {
		if err := <-errs; err != nil && first == nil && ctx.Err() == nil {
			first = err
		}
		cancel()
	}
	return first
}

// serveHTTPServer serves l with srv until ctx ends, over TLS when srv
// has a TLS configuration.
func serveHTTPServer(ctx context.Context, srv *http.Server, l net.Listener) error {
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if srv.Shutdown(shutdown) != nil {
			srv.Close()
		}
	}()
	var err error
	if srv.TLSConfig != nil {
		err = srv.ServeTLS(l, "", "")
	} else {
		err = srv.Serve(l)
	}
	if errors.Is(err, http.ErrServerClosed) {
		<-stopped
		return nil
	}
	return err
}

// echoBasicTLSVersion names a TLS version as the HTTP and gRPC answers
// do ("TLSv1.3"); the TCP answer uses Go's names instead.
func echoBasicTLSVersion(v uint16) string {
	switch v {
	case tls.VersionTLS13:
		return "TLSv1.3"
	case tls.VersionTLS12:
		return "TLSv1.2"
	case tls.VersionTLS11:
		return "TLSv1.1"
	case tls.VersionTLS10:
		return "TLSv1.0"
	}
	return ""
}

// pemCertificates are the client's certificates, each a PEM block: the
// suite compares them with its client certificate's PEM text.
func pemCertificates(certs []*x509.Certificate) []string {
	var out []string
	for _, c := range certs {
		out = append(out, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})))
	}
	return out
}
