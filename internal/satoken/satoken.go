// Package satoken signs and verifies ServiceAccount tokens: JWTs with
// Kubernetes' claims (issuer, audiences, expiry, and under
// "kubernetes.io" the namespace, the ServiceAccount and the object the
// token is bound to), so that client-go, kubectl and anything that reads
// a projected token see what a Kubernetes cluster issues.
package satoken

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Ref names an object a token belongs to or is bound to.
type Ref struct {
	Name string `json:"name"`
	UID  string `json:"uid"`
}

// Private are Kubernetes' own claims.
type Private struct {
	Namespace      string `json:"namespace"`
	ServiceAccount Ref    `json:"serviceaccount"`
	Pod            *Ref   `json:"pod,omitempty"`
	Secret         *Ref   `json:"secret,omitempty"`
	Node           *Ref   `json:"node,omitempty"`
	// WarnAfter is when a client should have refreshed the token.
	WarnAfter *jwt.NumericDate `json:"warnafter,omitempty"`
}

// Claims are a token's content.
type Claims struct {
	jwt.RegisteredClaims
	Kubernetes Private `json:"kubernetes.io"`
}

// Signer issues and checks the tokens of one issuer.
type Signer struct {
	Key    *ecdsa.PrivateKey
	Issuer string
	keyID  string
}

// NewSigner signs with key as issuer.
func NewSigner(key *ecdsa.PrivateKey, issuer string) (*Signer, error) {
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(der)
	// The key ID is derived from the public key, as Kubernetes does, so
	// that a verifier can pick the key from a JWKS.
	return &Signer{Key: key, Issuer: issuer, keyID: base64.RawURLEncoding.EncodeToString(sum[:])}, nil
}

// Token describes a token to issue.
type Token struct {
	Namespace      string
	ServiceAccount Ref
	Audiences      []string
	Lifetime       time.Duration
	Pod, Secret    *Ref
	Node           *Ref
}

// Sign issues a token valid from now for t.Lifetime.
func (s *Signer) Sign(t Token, now time.Time) (string, time.Time, error) {
	if t.Namespace == "" || t.ServiceAccount.Name == "" {
		return "", time.Time{}, errors.New("a token needs a namespace and a ServiceAccount")
	}
	exp := now.Add(t.Lifetime)
	jti := make([]byte, 16)
	if _, err := rand.Read(jti); err != nil {
		return "", time.Time{}, err
	}
	c := Claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    s.Issuer,
			Subject:   "system:serviceaccount:" + t.Namespace + ":" + t.ServiceAccount.Name,
			Audience:  t.Audiences,
			ExpiresAt: jwt.NewNumericDate(exp),
			NotBefore: jwt.NewNumericDate(now),
			IssuedAt:  jwt.NewNumericDate(now),
			ID:        fmt.Sprintf("%x-%x-%x-%x-%x", jti[0:4], jti[4:6], jti[6:8], jti[8:10], jti[10:]),
		},
		Kubernetes: Private{Namespace: t.Namespace, ServiceAccount: t.ServiceAccount, Pod: t.Pod, Secret: t.Secret, Node: t.Node},
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, c)
	tok.Header["kid"] = s.keyID
	signed, err := tok.SignedString(s.Key)
	return signed, exp, err
}

// ErrNotOurs is returned for a string that is not a JWT of this issuer:
// another authenticator may know it.
var ErrNotOurs = errors.New("not a ServiceAccount token of this issuer")

// Verify checks a token's signature, issuer, time window and that it is
// for one of audiences (any when empty); it returns its claims.
func (s *Signer) Verify(token string, audiences []string, now time.Time) (*Claims, error) {
	if strings.Count(token, ".") != 2 {
		return nil, ErrNotOurs
	}
	// The issuer is checked before the signature: a token of another
	// issuer is someone else's to judge.
	var peek Claims
	if _, _, err := jwt.NewParser().ParseUnverified(token, &peek); err != nil || peek.Issuer != s.Issuer {
		return nil, ErrNotOurs
	}
	var c Claims
	_, err := jwt.ParseWithClaims(token, &c, func(*jwt.Token) (any, error) { return &s.Key.PublicKey, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodES256.Alg()}), jwt.WithIssuer(s.Issuer),
		jwt.WithExpirationRequired(), jwt.WithTimeFunc(func() time.Time { return now }))
	if err != nil {
		return nil, fmt.Errorf("invalid ServiceAccount token: %w", err)
	}
	if c.Kubernetes.Namespace == "" || c.Kubernetes.ServiceAccount.Name == "" {
		return nil, errors.New("invalid ServiceAccount token: no namespace or ServiceAccount claim")
	}
	if len(audiences) > 0 && !slices.ContainsFunc([]string(c.Audience), func(a string) bool { return slices.Contains(audiences, a) }) {
		return nil, fmt.Errorf("invalid ServiceAccount token: audiences %q are not %q", c.Audience, audiences)
	}
	return &c, nil
}
