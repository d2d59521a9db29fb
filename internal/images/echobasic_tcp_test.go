package images

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// tcpAssertions decodes the answer to TEST by the JSON names the suite's
// TCP client reads (tcpserver.TCPAssertions).
type tcpAssertions struct {
	Namespace string `json:"namespace"`
	Ingress   string `json:"ingress"`
	Service   string `json:"service"`
	Pod       string `json:"pod"`
	TCPPort   string `json:"tcpport"`
	TLSPort   string `json:"tlsport"`
	IsTLS     bool   `json:"isTLS"`
	TLS       *struct {
		Version            string `json:"version"`
		ServerName         string `json:"serverName"`
		NegotiatedProtocol string `json:"negotiatedProtocol"`
		Curves             string `json:"curves"`
		CipherSuite        string `json:"cipherSuite"`
	} `json:"tls"`
}

// TestEchoBasicTCP: the TCP server's dialogue, as the suite's TCPRoute
// and TLSRoute tests hold it (a new reader for each line, as the suite
// reads).
func TestEchoBasicTCP(t *testing.T) {
	pki := newTestPKI(t)
	addrs, _ := startEchoBasic(t, echoBasicEnv("TCP_ECHO_SERVER", "1", "TLS_SERVER_CERT", pki.certFile, "TLS_SERVER_PRIV_KEY", pki.keyFile), "tcp", "tls")
	for _, tc := range []struct {
		name string
		dial func() (net.Conn, error)
		tls  bool
	}{
		{"plain", func() (net.Conn, error) { return net.DialTimeout("tcp", addrs["tcp"], 5*time.Second) }, false},
		{"TLS", func() (net.Conn, error) {
			return (&tls.Dialer{Config: pki.clientConfig()}).Dial("tcp", addrs["tls"])
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tc.dial()
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := c.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
				t.Fatal(err)
			}
			line := func() string {
				t.Helper()
				s, err := bufio.NewReader(c).ReadString('\n')
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			if got := line(); got != "Gateway API Test TCP Server\n" {
				t.Errorf("welcome %q", got)
			}
			for _, step := range []struct{ send, want string }{
				{"PING\n", "PONG\n"},
				{"HELLO\nPING\n", "PONG\n"}, // unknown lines get no answer
				{"IS_TLS\n", fmt.Sprintf("%t\n", tc.tls)},
				{"PING\r\n", "PONG\n"},
			} {
				if _, err := fmt.Fprint(c, step.send); err != nil {
					t.Fatal(err)
				}
				if got := line(); got != step.want {
					t.Errorf("%q: got %q, want %q", step.send, got, step.want)
				}
			}
			fmt.Fprint(c, "TEST\n")
			var a tcpAssertions
			if err := json.Unmarshal([]byte(line()), &a); err != nil {
				t.Fatal(err)
			}
			if a.Namespace != "gateway-conformance-infra" || !strings.HasPrefix(a.Pod, "infra-backend-v1-") || a.Service != "infra-backend-v1" ||
				a.TCPPort != "0" || a.TLSPort != "0" || a.IsTLS != tc.tls {
				t.Errorf("TEST: %+v", a)
			}
			switch {
			case !tc.tls && a.TLS != nil:
				t.Errorf("plain TEST with TLS %+v", a.TLS)
			case tc.tls && (a.TLS == nil || a.TLS.ServerName != "abc.example.com" || a.TLS.Version != "TLS 1.3" || a.TLS.Curves == "" || !strings.HasPrefix(a.TLS.CipherSuite, "TLS_")):
				t.Errorf("TLS TEST: %+v", a.TLS)
			}
		})
	}
}

// TestEchoBasicUDP: each datagram is answered with its JSON echo, as
// the suite's UDPRoute tests read it.
func TestEchoBasicUDP(t *testing.T) {
	addrs, _ := startEchoBasic(t, echoBasicEnv("UDP_ECHO_SERVER", "1"), "udp")
	c, err := net.Dial("udp", addrs["udp"])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, probe := range []string{"gateway-api-conformance-udp-echo", "Hello World\n", strings.Repeat("x", 4000)} {
		if err := c.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte(probe)); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 64<<10)
		n, err := c.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		var a struct {
			Request   string `json:"request"`
			Namespace string `json:"namespace"`
			Service   string `json:"service"`
			Pod       string `json:"pod"`
		}
		if err := json.Unmarshal(buf[:n], &a); err != nil {
			t.Fatalf("%q: %v", buf[:n], err)
		}
		if a.Request != probe || a.Namespace != "gateway-conformance-infra" || a.Service != "infra-backend-v1" || a.Pod != "infra-backend-v1-abc-123" {
			t.Errorf("answer to %.40q: %+v", probe, a)
		}
	}
}
