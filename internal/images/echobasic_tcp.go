package images

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"
)

// echo-basic's TCP server (TCP_ECHO_SERVER set), which TCPRoute and
// TLSRoute tests reach: TCP_PORT (3000) in plaintext and, when
// TLS_SERVER_CERT and TLS_SERVER_PRIV_KEY name its files, TLS_PORT
// (8443) over TLS. It greets each connection with echoBasicTCPWelcome,
// then answers the lines the client sends:
//
//	PING    PONG
//	IS_TLS  true or false: whether the connection to it is TLS
//	TEST    one line of JSON (echoBasicTCPAnswer): the pod, its ports and
//	        the TLS connection (its SNI above all)
//
// and ignores any other line, until the client closes the connection.

// echoBasicTCPWelcome is the greeting; the suite compares it byte for
// byte.
const echoBasicTCPWelcome = "Gateway API Test TCP Server\n"

// echoBasicTCPAnswer is the answer to TEST.
type echoBasicTCPAnswer struct {
	echoBasicPod
	TCPPort string           `json:"tcpport"`
	TLSPort string           `json:"tlsport,omitempty"`
	IsTLS   bool             `json:"isTLS"`
	TLS     *echoBasicTCPTLS `json:"tls,omitempty"`
}

// echoBasicTCPTLS is the TLS connection, with Go's names for the
// version and the key exchange.
type echoBasicTCPTLS struct {
	Version            string `json:"version"`
	ServerName         string `json:"serverName"`
	NegotiatedProtocol string `json:"negotiatedProtocol,omitempty"`
	Curves             string `json:"curves,omitempty"`
	CipherSuite        string `json:"cipherSuite"`
}

func (e *echoBasic) serveTCP(ctx context.Context) error {
	tcpPort, err := e.port("TCP_PORT", "3000")
	if err != nil {
		return err
	}
	tlsPort, err := e.port("TLS_PORT", "8443")
	if err != nil {
		return err
	}
	cert, err := e.keyPair("TLS_SERVER_CERT", "TLS_SERVER_PRIV_KEY")
	if err != nil {
		return err
	}
	base := echoBasicTCPAnswer{echoBasicPod: e.pod(), TCPPort: tcpPort, TLSPort: tlsPort}
	l, err := e.listen(ctx, "tcp", tcpPort)
	if err != nil {
		return err
	}
	serves := []func(context.Context) error{func(ctx context.Context) error { return e.acceptTCP(ctx, l, nil, base) }}
	if cert != nil {
		tl, err := e.listen(ctx, "tls", tlsPort)
		if err != nil {
			l.Close()
			return err
		}
		config := &tls.Config{Certificates: []tls.Certificate{*cert}, MinVersion: tls.VersionTLS12}
		serves = append(serves, func(ctx context.Context) error { return e.acceptTCP(ctx, tl, config, base) })
	}
	return serveAll(ctx, serves...)
}

// acceptTCP serves l's connections until ctx ends, over TLS with config
// when it is set.
func (e *echoBasic) acceptTCP(ctx context.Context, l net.Listener, config *tls.Config, base echoBasicTCPAnswer) error {
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			time.Sleep(50 * time.Millisecond) // out of descriptors, say: try again
			continue
		}
		go func() {
			defer c.Close()
			defer context.AfterFunc(ctx, func() { c.Close() })()
			if config != nil {
				c = tls.Server(c, config)
			}
			if err := echoTCPConn(ctx, c, base); err != nil {
				e.logf("tcp connection from %s: %v", c.RemoteAddr(), err)
			}
		}()
	}
}

// echoTCPConn speaks to one client.
func echoTCPConn(ctx context.Context, c net.Conn, answer echoBasicTCPAnswer) error {
	if tc, ok := c.(*tls.Conn); ok {
		hs, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := tc.HandshakeContext(hs)
		cancel()
		if err != nil {
			return fmt.Errorf("TLS handshake: %w", err)
		}
		s := tc.ConnectionState()
		answer.IsTLS = true
		answer.TLS = &echoBasicTCPTLS{
			Version:            tls.VersionName(s.Version),
			ServerName:         s.ServerName,
			NegotiatedProtocol: s.NegotiatedProtocol,
			CipherSuite:        tls.CipherSuiteName(s.CipherSuite),
		}
		if s.CurveID != 0 {
			answer.TLS.Curves = s.CurveID.String()
		}
	}
	test, err := json.Marshal(answer)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprint(c, echoBasicTCPWelcome); err != nil {
		return err
	}
	lines := bufio.NewScanner(c)
	for lines.Scan() {
		var reply string
		switch lines.Text() {
		case "PING":
			reply = "PONG"
		case "IS_TLS":
			reply = fmt.Sprint(answer.IsTLS)
		case "TEST":
			reply = string(test)
		default:
			continue
		}
		if _, err := fmt.Fprintf(c, "%s\n", reply); err != nil {
			return err
		}
	}
	if err := lines.Err(); err != nil && ctx.Err() == nil {
		return err
	}
	return nil // the client is done, or ctx ended and closed c
}
