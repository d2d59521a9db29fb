package proxy

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"strconv"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/ingress/route"
	"github.com/svcnet/svcnet/internal/ingress/upstream"
	"github.com/svcnet/svcnet/internal/pki"
)

// testCA is the cluster's CA code, signing leaf certificates for test
// hosts.
type testCA struct {
	*pki.CA
	pool *x509.CertPool
}

func newTestCA(t *testing.T) *testCA {
	ca, err := pki.EnsureCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return &testCA{CA: ca, pool: pool}
}

func (ca *testCA) leaf(t *testing.T, names ...string) *tls.Certificate {
	crt, key, err := ca.Issue(names[0], nil, names, false)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(crt, key)
	if err != nil {
		t.Fatal(err)
	}
	return &cert
}

func TestTLS(t *testing.T) {
	ca := newTestCA(t)
	a := echo(t, "a")
	prefix := ptr.To(networkingv1.PathTypePrefix)
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}, Spec: networkingv1.IngressSpec{
		TLS: []networkingv1.IngressTLS{{Hosts: []string{"secure.example", "*.wild.example"}, SecretName: "cert"}},
		Rules: []networkingv1.IngressRule{
			{Host: "secure.example"}, {Host: "x.wild.example"}, {Host: "plain.example"},
		}}}
	for i := range ing.Spec.Rules {
		ing.Spec.Rules[i].HTTP = &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: prefix,
			Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "a", Port: networkingv1.ServiceBackendPort{Number: 80}}}}}}
	}
	table, _ := route.Build([]*networkingv1.Ingress{ing})
	u := upstream.New(table.Backends[0])
	u.Set([]string{a})

	tlsL, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	httpsPort := tlsL.Addr().(*net.TCPAddr).Port
	p := New(Options{HTTPSPort: httpsPort})
	p.Set(table, []*upstream.Upstream{u})
	def, err := SelfSigned()
	if err != nil {
		t.Fatal(err)
	}
	certs := NewCerts(def)
	certs.Add("secure.example", ca.leaf(t, "secure.example"))
	certs.Add("*.wild.example", ca.leaf(t, "*.wild.example"))
	p.SetCerts(certs)
	srvTLS := &http.Server{Handler: p.Handler(httpsPort), TLSConfig: p.TLSConfig()}
	go srvTLS.ServeTLS(tlsL, "", "")
	plainL, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srvPlain := &http.Server{Handler: p.Handler(plainL.Addr().(*net.TCPAddr).Port)}
	go srvPlain.Serve(plainL)
	t.Cleanup(func() { srvTLS.Close(); srvPlain.Close(); p.Close() })

	tests := []struct {
		name, sni string
		verifies  bool
	}{
		{"exact host", "secure.example", true},
		{"wildcard", "x.wild.example", true},
		{"wildcard is one label", "a.x.wild.example", false},
		{"no certificate: the default", "plain.example", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn, err := tls.Dial("tcp", tlsL.Addr().String(), &tls.Config{RootCAs: ca.pool, ServerName: tt.sni, NextProtos: []string{"h2", "http/1.1"}})
			if (err == nil) != tt.verifies {
				t.Fatalf("handshake for %s: %v, want verified %v", tt.sni, err, tt.verifies)
			}
			if err == nil {
				if p := conn.ConnectionState().NegotiatedProtocol; p != "h2" {
					t.Errorf("ALPN: %q, want h2", p)
				}
				conn.Close()
			}
		})
	}
	// Through HTTPS with HTTP/2, and the redirect from plain HTTP.
	tr := &http.Transport{ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{RootCAs: ca.pool, ServerName: "secure.example"}}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest("GET", "https://"+tlsL.Addr().String()+"/x", nil)
	req.Host = "secure.example"
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.ProtoMajor != 2 || resp.Header.Get("X-Pod") != "a" {
		t.Fatalf("HTTPS: %d over HTTP/%d from %q", resp.StatusCode, resp.ProtoMajor, resp.Header.Get("X-Pod"))
	}
	redirects := []struct{ host, want string }{
		{"secure.example", "https://secure.example:" + strconv.Itoa(httpsPort) + "/a/b?q=1"},
		{"x.wild.example:8080", "https://x.wild.example:" + strconv.Itoa(httpsPort) + "/a/b?q=1"},
		{"plain.example", ""},
	}
	for _, r := range redirects {
		req, _ := http.NewRequest("POST", "http://"+plainL.Addr().String()+"/a//b?q=1", nil)
		req.Host = r.host
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if r.want == "" {
			if resp.StatusCode != 200 {
				t.Errorf("%s: %d, want 200 without TLS", r.host, resp.StatusCode)
			}
			continue
		}
		if resp.StatusCode != http.StatusPermanentRedirect || resp.Header.Get("Location") != r.want {
			t.Errorf("%s: %d to %q, want 308 to %q", r.host, resp.StatusCode, resp.Header.Get("Location"), r.want)
		}
	}
}
