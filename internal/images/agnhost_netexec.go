package images

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// netexec is agnhost's netexec: an HTTP(S) server of test endpoints
// (agnhost_netexec_http.go), a UDP server of the same few commands
// (agnhost_netexec_udp.go), and /dial to make either kind of request
// from the pod (agnhost_dial.go).
type netexec struct {
	env *agnhostEnv
	log *log.Logger

	httpPort, udpPort, sctpPort int
	certFile, keyFile           string
	httpOverride                string
	udpAddresses                string
	delayShutdown               int

	// ready is set while a UDP server runs: /healthz and /readyz say
	// so (a netexec without one is never ready, as agnhost's).
	ready atomic.Bool
	// terminating closes at SIGTERM: /readyz answers 503 from then on.
	terminating chan struct{}
	// exits carries /exit's and /shutdown's requests to end the process.
	exits   chan netexecExit
	stopped chan struct{}
}

// netexecExit asks netexec to exit with code, after letting open
// requests finish for up to grace (0: at once).
type netexecExit struct {
	code  int
	grace time.Duration
}

func agnhostNetexec(ctx context.Context, env *agnhostEnv, args []string) error {
	n := &netexec{
		env:         env,
		log:         env.logger(),
		terminating: make(chan struct{}),
		exits:       make(chan netexecExit),
		stopped:     make(chan struct{}),
	}
	fs := agnhostFlagSet(env, "netexec")
	fs.IntVar(&n.httpPort, "http-port", 8080, "HTTP port")
	fs.StringVar(&n.certFile, "tls-cert-file", "", "x509 certificate file: serve HTTPS")
	fs.StringVar(&n.keyFile, "tls-private-key-file", "", "private key of --tls-cert-file")
	fs.IntVar(&n.udpPort, "udp-port", 8081, "UDP port (-1: no UDP server)")
	fs.IntVar(&n.sctpPort, "sctp-port", -1, "SCTP port (-1: none)")
	fs.StringVar(&n.httpOverride, "http-override", "", "answer every HTTP request as a GET of this path and query")
	fs.StringVar(&n.udpAddresses, "udp-listen-addresses", "", "comma-separated IP addresses for the UDP servers (default: all)")
	fs.IntVar(&n.delayShutdown, "delay-shutdown", 0, "seconds to keep serving after SIGTERM")
	if _, err := parseAgnhostFlags(fs, args, 0); err != nil {
		return err
	}
	defer close(n.stopped)
	return n.run(ctx)
}

func (n *netexec) run(ctx context.Context) error {
	if n.sctpPort != -1 {
		return fmt.Errorf("netexec: --sctp-port=%d: %w", n.sctpPort, errSCTP)
	}
	failed := make(chan error, 8)
	var udp []net.PacketConn
	defer func() {
		for _, c := range udp {
			c.Close()
		}
	}()
	if n.udpPort != -1 {
		addrs, err := udpListenAddresses(n.udpAddresses)
		if err != nil {
			return err
		}
		for _, a := range addrs {
			c, err := net.ListenPacket("udp", n.env.addr(a, strconv.Itoa(n.udpPort)))
			if err != nil {
				return fmt.Errorf("netexec: UDP server: %w", err)
			}
			udp = append(udp, c)
			n.env.announce("udp", c.LocalAddr())
			n.log.Printf("Started UDP server on port %s %d", a, n.udpPort)
		}
		n.ready.Store(true)
		for _, c := range udp {
			go func() {
				err := n.serveUDP(c)
				select {
				case failed <- err:
				case <-n.stopped:
				}
			}()
		}
	}

	l, err := net.Listen("tcp", n.env.addr("", strconv.Itoa(n.httpPort)))
	if err != nil {
		return fmt.Errorf("netexec: HTTP server: %w", err)
	}
	n.env.announce("http", l.Addr())
	srv := &http.Server{Handler: n.handler(), ErrorLog: n.log}
	go func() {
		var err error
		if n.certFile != "" {
			err = srv.ServeTLS(l, n.certFile, n.keyFile)
		} else {
			err = srv.Serve(l)
		}
		if errors.Is(err, http.ErrServerClosed) {
			return
		}
		select {
		case failed <- fmt.Errorf("netexec: HTTP server: %w", err):
		case <-n.stopped:
		}
	}()
	n.log.Printf("Started HTTP server on port %d", n.httpPort)

	var exit netexecExit
	select {
	case <-ctx.Done():
		// SIGTERM: /readyz turns 503, and the servers go on for
		// --delay-shutdown seconds (unless asked to exit meanwhile).
		close(n.terminating)
		if n.delayShutdown > 0 {
			n.log.Printf("Sleeping %d seconds before terminating...", n.delayShutdown)
			select {
			case <-time.After(time.Duration(n.delayShutdown) * time.Second):
			case exit = <-n.exits:
			case err := <-failed:
				srv.Close()
				return err
			}
		}
	case exit = <-n.exits:
	case err := <-failed:
		srv.Close()
		return err
	}
	if exit.grace > 0 {
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), exit.grace)
		err := srv.Shutdown(shutdown)
		cancel()
		n.log.Printf("Graceful shutdown completed with: %v", err)
	} else {
		srv.Close()
	}
	return agnhostExit(exit.code)
}

// requestExit passes an /exit or /shutdown to run; false if netexec is
// already ending.
func (n *netexec) requestExit(e netexecExit) bool {
	select {
	case n.exits <- e:
		return true
	case <-n.stopped:
		return false
	}
}

// udpListenAddresses reads --udp-listen-addresses: IP addresses, each
// once, sorted; none means the wildcard address.
func udpListenAddresses(s string) ([]string, error) {
	if s == "" {
		return []string{""}, nil
	}
	var out []string
	for _, a := range strings.Split(s, ",") {
		ip := parseIPLeadingZeros(a)
		if ip == nil {
			return nil, fmt.Errorf("netexec: --udp-listen-addresses: invalid address %s", a)
		}
		out = append(out, ip.String())
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// parseIPLeadingZeros parses an IP address, taking IPv4 parts with
// leading zeros ("010.000.000.001") as decimal, as Kubernetes does.
func parseIPLeadingZeros(s string) net.IP {
	if ip := net.ParseIP(s); ip != nil {
		return ip
	}
	parts := strings.Split(s, ".")
	if len(parts) != 4 {
		return nil
	}
	b := make([]byte, 4)
	for i, p := range parts {
		v, err := strconv.ParseUint(p, 10, 8)
		if err != nil || p == "" {
			return nil
		}
		b[i] = byte(v)
	}
	return net.IP(b)
}
