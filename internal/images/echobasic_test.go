package images

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"maps"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/syncbuf"
)

// The tests run echo-basic's servers on loopback, on ports the system
// picks (port variables of 0), and check their answers the way the
// conformance suite's clients read them.

// echoBasicEnv is the environment of a test's echo-basic: the pod
// context of the suite's manifests, every port 0.
func echoBasicEnv(extra ...string) map[string]string {
	env := map[string]string{
		"POD_NAME": "infra-backend-v1-abc-123", "NAMESPACE": "gateway-conformance-infra", "SERVICE_NAME": "infra-backend-v1",
		"HTTP_PORT": "0", "H2C_PORT": "0", "HTTPS_PORT": "0", "TCP_PORT": "0", "TLS_PORT": "0", "UDP_PORT": "0",
	}
	for i := 0; i+1 < len(extra); i += 2 {
		env[extra[i]] = extra[i+1]
	}
	return env
}

// startEchoBasic runs echo-basic with env until the test ends and
// returns the addresses of its servers, which must be those named, and
// its log.
func startEchoBasic(t *testing.T, env map[string]string, servers ...string) (map[string]string, *syncbuf.Buffer) {
	t.Helper()
	type announcement struct {
		name string
		addr net.Addr
	}
	announced := make(chan announcement, 8)
	stdout := &syncbuf.Buffer{}
	e := &echoBasic{
		getenv:    func(k string) string { return env[k] },
		stdout:    stdout,
		bindHost:  "127.0.0.1",
		listening: func(name string, a net.Addr) { announced <- announcement{name, a} },
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.run(ctx) }()
	addrs := map[string]string{}
	for len(addrs) < len(servers) {
		select {
		case a := <-announced:
			addrs[a.name] = a.addr.String()
		case err := <-done:
			cancel()
			t.Fatalf("echo-basic ended before listening: %v", err)
		case <-time.After(5 * time.Second):
			cancel()
			t.Fatalf("echo-basic did not listen (so far: %v)", addrs)
		}
	}
	for _, s := range servers {
		if addrs[s] == "" {
			cancel()
			t.Fatalf("echo-basic servers %v, want %v", addrs, servers)
		}
	}
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("echo-basic: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("echo-basic did not stop")
		}
		select {
		case a := <-announced:
			t.Errorf("echo-basic also served %s on %s", a.name, a.addr)
		default:
		}
	})
	return addrs, stdout
}

// testPKI is what the suite's Secrets and ConfigMaps hold, as files: a
// CA, the backend's certificate for abc.example.com (signed by it) and a
// client's certificate (signed by it too).
type testPKI struct {
	caPEM                []byte
	certFile, keyFile    string
	caFile               string
	client               tls.Certificate
	clientPEM            string
	strangerClient       tls.Certificate // signed by another CA
	serverName           string
	roots                *x509.CertPool
	serverCertificatePEM []byte
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	dir := t.TempDir()
	ca, caKey := testCert(t, "test CA", nil, nil, true, nil)
	other, otherKey := testCert(t, "other CA", nil, nil, true, nil)
	server, serverKey := testCert(t, "abc.example.com", ca, caKey, false, []string{"abc.example.com"})
	client, clientKey := testCert(t, "client", ca, caKey, false, nil)
	stranger, strangerKey := testCert(t, "stranger", other, otherKey, false, nil)
	p := &testPKI{
		caPEM:                pemCert(ca),
		certFile:             filepath.Join(dir, "crt"),
		keyFile:              filepath.Join(dir, "key"),
		caFile:               filepath.Join(dir, "ca"),
		client:               tls.Certificate{Certificate: [][]byte{client.Raw}, PrivateKey: clientKey},
		clientPEM:            string(pemCert(client)),
		strangerClient:       tls.Certificate{Certificate: [][]byte{stranger.Raw}, PrivateKey: strangerKey},
		serverName:           "abc.example.com",
		roots:                x509.NewCertPool(),
		serverCertificatePEM: pemCert(server),
	}
	p.roots.AddCert(ca)
	keyDER, err := x509.MarshalPKCS8PrivateKey(serverKey)
	if err != nil {
		t.Fatal(err)
	}
	for file, data := range map[string][]byte{
		p.certFile: p.serverCertificatePEM,
		p.keyFile:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		p.caFile:   p.caPEM,
	} {
		if err := os.WriteFile(file, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// clientConfig is a client's TLS configuration that trusts the CA and
// asks for the backend's name; it presents cert, if given, whatever CAs
// the server names (as the suite's client does, by a hook).
func (p *testPKI) clientConfig(cert ...tls.Certificate) *tls.Config {
	c := &tls.Config{RootCAs: p.roots, ServerName: p.serverName}
	if len(cert) > 0 {
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert[0], nil }
	}
	return c
}

func testCert(t *testing.T, cn string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, isCA bool, dnsNames []string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 64))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		IsCA:                  isCA,
		DNSNames:              dnsNames,
	}
	if isCA {
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func pemCert(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

// TestEchoBasicStartErrors: a configuration the servers cannot serve
// stops the image with an error that names the variable.
func TestEchoBasicStartErrors(t *testing.T) {
	pki := newTestPKI(t)
	missing := filepath.Join(t.TempDir(), "missing")
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"bad HTTP port", echoBasicEnv("HTTP_PORT", "http"), "HTTP_PORT"},
		{"bad TCP port", echoBasicEnv("TCP_ECHO_SERVER", "1", "TCP_PORT", "70000"), "TCP_PORT"},
		{"bad UDP port", echoBasicEnv("UDP_ECHO_SERVER", "1", "UDP_PORT", "-1"), "UDP_PORT"},
		{"HTTPS certificate missing", echoBasicEnv("TLS_SERVER_CERT", missing, "TLS_SERVER_PRIVKEY", missing), "TLS_SERVER_CERT"},
		{"gRPC certificate missing", echoBasicEnv("GRPC_ECHO_SERVER", "1", "TLS_SERVER_CERT", missing, "TLS_SERVER_PRIV_KEY", missing), "TLS_SERVER_CERT"},
		{"client CA missing", echoBasicEnv("TLS_SERVER_CERT", pki.certFile, "TLS_SERVER_PRIVKEY", pki.keyFile, "TLS_CLIENT_CACERTS", missing), "TLS_CLIENT_CACERTS"},
		{"client CA not PEM", echoBasicEnv("TLS_SERVER_CERT", pki.certFile, "TLS_SERVER_PRIVKEY", pki.keyFile, "TLS_CLIENT_CACERTS", pki.keyFile), "TLS_CLIENT_CACERTS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &echoBasic{getenv: func(k string) string { return tc.env[k] }, stdout: &syncbuf.Buffer{}, bindHost: "127.0.0.1"}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err := e.run(ctx)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("run = %v, want an error naming %s", err, tc.want)
			}
		})
	}
}

// TestEchoBasicServers: the environment picks the servers, as the
// suite's manifests set it.
func TestEchoBasicServers(t *testing.T) {
	pki := newTestPKI(t)
	for _, tc := range []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"http", echoBasicEnv(), []string{"http", "h2c"}},
		{"http with TLS", echoBasicEnv("TLS_SERVER_CERT", pki.certFile, "TLS_SERVER_PRIVKEY", pki.keyFile), []string{"http", "h2c", "https"}},
		// The HTTP servers' key variable is not the others'.
		{"http with the other key name", echoBasicEnv("TLS_SERVER_CERT", pki.certFile, "TLS_SERVER_PRIV_KEY", pki.keyFile), []string{"http", "h2c"}},
		{"grpc", echoBasicEnv("GRPC_ECHO_SERVER", "1"), []string{"grpc"}},
		{"grpc with TLS", echoBasicEnv("GRPC_ECHO_SERVER", "1", "TLS_SERVER_CERT", pki.certFile, "TLS_SERVER_PRIV_KEY", pki.keyFile), []string{"grpc", "grpc-tls"}},
		{"tcp", echoBasicEnv("TCP_ECHO_SERVER", "1"), []string{"tcp"}},
		{"tcp with TLS", echoBasicEnv("TCP_ECHO_SERVER", "1", "TLS_SERVER_CERT", pki.certFile, "TLS_SERVER_PRIV_KEY", pki.keyFile), []string{"tcp", "tls"}},
		{"udp", echoBasicEnv("UDP_ECHO_SERVER", "1"), []string{"udp"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addrs, _ := startEchoBasic(t, tc.env, tc.want...)
			if got := slices.Sorted(maps.Keys(addrs)); !slices.Equal(got, slices.Sorted(slices.Values(tc.want))) {
				t.Errorf("servers %v, want %v", got, tc.want)
			}
		})
	}
}
