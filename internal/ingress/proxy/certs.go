package proxy

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"strings"
	"time"

	"github.com/svcnet/svcnet/internal/ingress/route"
)

// Certs is an immutable set of server certificates chosen by SNI: the
// host's own, else a wildcard's (one label), else the default.
type Certs struct {
	exact    map[string]*tls.Certificate
	wildcard map[string]*tls.Certificate // by the suffix after "*."
	fallback *tls.Certificate
}

// NewCerts starts a set whose default certificate is def.
func NewCerts(def *tls.Certificate) *Certs {
	return &Certs{exact: map[string]*tls.Certificate{}, wildcard: map[string]*tls.Certificate{}, fallback: def}
}

// Add serves cert for host (exact, or *.suffix); only before the set is
// handed to SetCerts.
func (c *Certs) Add(host string, cert *tls.Certificate) {
	if suffix, ok := strings.CutPrefix(host, "*."); ok {
		c.wildcard[suffix] = cert
		return
	}
	c.exact[host] = cert
}

// For picks the certificate for a TLS ServerName.
func (c *Certs) For(serverName string) *tls.Certificate {
	h := route.NormalizeHost(serverName)
	if cert := c.exact[h]; cert != nil {
		return cert
	}
	if i := strings.IndexByte(h, '.'); i > 0 {
		if cert := c.wildcard[h[i+1:]]; cert != nil {
			return cert
		}
	}
	return c.fallback
}

// Default is the certificate served to names without one of their own.
func (c *Certs) Default() *tls.Certificate { return c.fallback }

// SetCerts swaps in a certificate set; handshakes already begun keep
// theirs.
func (p *Proxy) SetCerts(c *Certs) { p.certs.Store(c) }

// TLSConfig is the listener's TLS configuration: certificates by SNI from
// the current set, HTTP/2 offered by ALPN.
func (p *Proxy) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			return p.certs.Load().For(hello.ServerName), nil
		},
	}
}

// SelfSigned makes the default certificate used when none is given, as
// ingress-nginx's "Kubernetes Ingress Controller Fake Certificate": it
// lets TLS work before any Secret exists, and no client trusts it.
func SelfSigned() (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{Organization: []string{"svcnet"}, CommonName: "svcnet ingress default certificate"},
		DNSNames:     []string{"ingress.local"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(1, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}
