package controller

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svcnet/svcnet/internal/ingress/proxy"
	"github.com/svcnet/svcnet/internal/ingress/route"
)

// Reasons of certificate problems, as Warning events.
const (
	ReasonMissingSecret = "MissingSecret"
	ReasonInvalidSecret = "InvalidCertificate"
)

// certCache parses each Secret once per resourceVersion: a routes rebuild
// must not redo the crypto of every certificate.
type certCache struct {
	parsed map[types.UID]parsedCert
}

type parsedCert struct {
	version string
	cert    *tls.Certificate
	err     error
}

// load returns the Secret's certificate, or why it cannot be used.
func (c *certCache) load(s *corev1.Secret) (*tls.Certificate, error) {
	if p, ok := c.parsed[s.UID]; ok && p.version == s.ResourceVersion {
		return p.cert, p.err
	}
	cert, err := parseSecret(s)
	c.parsed[s.UID] = parsedCert{version: s.ResourceVersion, cert: cert, err: err}
	return cert, err
}

// parseSecret reads a kubernetes.io/tls Secret's tls.crt and tls.key.
func parseSecret(s *corev1.Secret) (*tls.Certificate, error) {
	if s.Type != corev1.SecretTypeTLS {
		return nil, fmt.Errorf("is of type %q, not %s", s.Type, corev1.SecretTypeTLS)
	}
	crt, key := s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey]
	if len(crt) == 0 || len(key) == 0 {
		return nil, errors.New("has no tls.crt or tls.key")
	}
	cert, err := tls.X509KeyPair(crt, key)
	if err != nil {
		return nil, err
	}
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, err
		}
	}
	return &cert, nil
}

// certificates builds the SNI set of a table: each TLS host's Secret,
// checked to cover the host; a missing, invalid or mismatched one leaves
// the host on the default certificate and is a problem of its Ingress.
func (c *Controller) certificates(t *route.Table, def *tls.Certificate) (*proxy.Certs, []route.Problem) {
	certs := proxy.NewCerts(def)
	var problems []route.Problem
	for _, h := range t.TLS {
		bad := func(reason, format string, args ...any) {
			problems = append(problems, route.Problem{Ingress: h.Ingress, Reason: reason,
				Message: fmt.Sprintf("host %s: Secret %s ", h.Host, h.Secret) + fmt.Sprintf(format, args...) + "; serving the default certificate"})
		}
		s, err := c.secrets.Secrets(h.Secret.Namespace).Get(h.Secret.Name)
		if err != nil {
			bad(ReasonMissingSecret, "not found")
			continue
		}
		cert, err := c.certs.load(s)
		if err != nil {
			bad(ReasonInvalidSecret, "%v", err)
			continue
		}
		if err := cert.Leaf.VerifyHostname(verifyName(h.Host)); err != nil {
			bad(ReasonInvalidSecret, "does not cover the host: %v", err)
			continue
		}
		certs.Add(h.Host, cert)
	}
	return certs, problems
}

// verifyName is a name a certificate for host must cover: a wildcard
// host needs a wildcard certificate.
func verifyName(host string) string {
	if len(host) > 2 && host[:2] == "*." {
		return "svcnet-wildcard-check." + host[2:]
	}
	return host
}
