package satoken

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"
)

func newSigner(t *testing.T, issuer string) *Signer {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSigner(key, issuer)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSignVerify(t *testing.T) {
	const iss = "https://kubernetes.default.svc.cluster.local"
	s := newSigner(t, iss)
	other := newSigner(t, iss)
	foreign := newSigner(t, "https://elsewhere")
	now := time.Unix(1_800_000_000, 0)
	tok := Token{Namespace: "team", ServiceAccount: Ref{Name: "builder", UID: "u1"}, Audiences: []string{iss}, Lifetime: time.Hour,
		Pod: &Ref{Name: "p", UID: "pu"}}
	signed, exp, err := s.Sign(tok, now)
	if err != nil || !exp.Equal(now.Add(time.Hour)) {
		t.Fatalf("Sign = %v, %v", exp, err)
	}
	c, err := s.Verify(signed, []string{iss}, now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if c.Subject != "system:serviceaccount:team:builder" || c.Kubernetes.Pod.UID != "pu" || c.Kubernetes.ServiceAccount.UID != "u1" {
		t.Fatalf("claims %+v", c)
	}
	foreignTok, _, _ := foreign.Sign(tok, now)
	for _, tc := range []struct {
		name, token string
		auds        []string
		at          time.Time
		notOurs     bool
	}{
		{"expired", signed, nil, now.Add(2 * time.Hour), false},
		{"not yet valid", signed, nil, now.Add(-time.Minute), false},
		{"another audience", signed, []string{"vault"}, now, false},
		{"another key", func() string { o, _, _ := other.Sign(tok, now); return o }(), nil, now, false},
		{"tampered claims", tamper(signed), nil, now, false},
		{"another issuer", foreignTok, nil, now, true},
		{"not a JWT", "0123456789abcdef", nil, now, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A token of another key is checked against this one's.
			_, err := s.Verify(tc.token, tc.auds, tc.at)
			if err == nil {
				t.Fatal("accepted")
			}
			if errors.Is(err, ErrNotOurs) != tc.notOurs {
				t.Fatalf("err %v: not-ours = %v, want %v", err, errors.Is(err, ErrNotOurs), tc.notOurs)
			}
		})
	}
}

// tamper moves the token to another namespace and keeps the signature.
func tamper(tok string) string {
	parts := strings.Split(tok, ".")
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	payload = []byte(strings.ReplaceAll(string(payload), "team", "kube-system"))
	parts[1] = base64.RawURLEncoding.EncodeToString(payload)
	return strings.Join(parts, ".")
}
