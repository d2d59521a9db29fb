package proxy

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/svcnet/svcnet/internal/ingress/route"
	"github.com/svcnet/svcnet/internal/ingress/upstream"
)

// TestStream serves a port of TLS listeners: a connection whose SNI is
// passed through reaches the backend's own TLS server; one the proxy
// terminates reaches a plain backend with its bytes; one no listener
// takes is closed.
func TestStream(t *testing.T) {
	tlsBackend := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "from the backend's TLS") }))
	t.Cleanup(tlsBackend.Close)
	plain := rawPod(t, func(c net.Conn) {
		line, _ := bufio.NewReader(c).ReadString('\n')
		_, _ = io.WriteString(c, "plain got "+line)
	})
	ups := []*upstream.Upstream{
		upstream.New(route.BackendRef{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "pass"}, Port: 443}),
		upstream.New(route.BackendRef{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "term"}, Port: 80}),
	}
	ups[0].Set([]string{tlsBackend.Listener.Addr().String()})
	ups[1].Set([]string{plain})
	router := funcRouter(func(r *route.Request) *route.Route {
		switch r.Host {
		case "pass.example":
			return &route.Route{Backend: 0}
		case "term.example":
			return &route.Route{Backend: 1}
		}
		return nil
	})
	p := New(Options{})
	t.Cleanup(p.Close)
	p.Set(&route.Mux{Default: router, ByPort: map[int]route.Router{}, Backends: []route.BackendRef{ups[0].Ref, ups[1].Ref}}, ups)
	cert, err := SelfSigned()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		_ = p.ServeStream(l, 0, func(sni string) (*tls.Certificate, bool) {
			switch sni {
			case "pass.example":
				return nil, true
			case "term.example", "lost.example":
				return cert, true
			}
			return nil, false
		})
	}()
	dial := func(sni string) (*tls.Conn, error) {
		d := &net.Dialer{Timeout: 5 * time.Second}
		return tls.DialWithDialer(d, "tcp", l.Addr().String(), &tls.Config{ServerName: sni, InsecureSkipVerify: true})
	}

	c, err := dial("pass.example")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.ConnectionState().PeerCertificates[0].Subject.Organization; len(got) == 0 || got[0] != "Acme Co" {
		t.Errorf("passed through to %v, not the backend's certificate", got)
	}
	_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: pass.example\r\nConnection: close\r\n\r\n")
	body, _ := io.ReadAll(c)
	if !strings.Contains(string(body), "from the backend's TLS") {
		t.Errorf("passthrough answer %q", body)
	}
	c.Close()

	c, err = dial("term.example")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.ConnectionState().PeerCertificates[0].Subject.Organization; len(got) == 0 || got[0] != "svcnet" {
		t.Errorf("terminated with %v, not the listener's certificate", got)
	}
	_, _ = io.WriteString(c, "hello\n")
	line, _ := bufio.NewReader(c).ReadString('\n')
	if line != "plain got hello\n" {
		t.Errorf("terminated answer %q", line)
	}
	c.Close()

	for _, sni := range []string{"other.example", "lost.example"} {
		if c, err := dial(sni); err == nil {
			c.Close()
			t.Errorf("%s: handshake done, want the connection closed", sni)
		}
	}
}
