package apiserver

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/group"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/request/union"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	"k8s.io/apiserver/pkg/authentication/token/tokenfile"
	tokenunion "k8s.io/apiserver/pkg/authentication/token/union"
	"k8s.io/apiserver/pkg/authentication/user"
)

// newAuthenticator accepts client certificates signed by ca and the bearer
// tokens of tokenFile (kube-apiserver's --token-auth-file format). Requests
// without credentials are anonymous only on the public paths; anywhere
// else they get 401.
// APIAudience is the audience of the API server's own tokens, as
// kube-apiserver's default (its --service-account-issuer).
const APIAudience = "https://kubernetes.default.svc.cluster.local"

// newAuthenticator accepts client certificates signed by ca and bearer
// tokens; it also returns the token authenticator alone (TokenReview).
func newAuthenticator(ca *x509.CertPool, tokenFile string, more ...authenticator.Token) (authenticator.Request, authenticator.Token, error) {
	auths := []authenticator.Request{
		x509request.New(x509.VerifyOptions{Roots: ca, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}},
			x509request.CommonNameUserConversion),
	}
	var tokenAuths []authenticator.Token
	if tokenFile != "" {
		tokens, err := tokenfile.NewCSV(tokenFile)
		if err != nil {
			return nil, nil, fmt.Errorf("token auth file %s: %w", tokenFile, err)
		}
		tokenAuths = append(tokenAuths, tokens)
	}
	tokens := tokenunion.New(append(tokenAuths, more...)...)
	auths = append(auths, bearertoken.New(tokens))
	return union.New(group.NewAuthenticatedGroupAdder(union.New(auths...)), publicAnonymous{}),
		group.NewTokenGroupAdder(tokens, []string{user.AllAuthenticated}), nil
}

// publicAnonymous authenticates credential-less requests for the public
// paths as system:anonymous.
type publicAnonymous struct{}

func (publicAnonymous) AuthenticateRequest(req *http.Request) (*authenticator.Response, bool, error) {
	if req.Header.Get("Authorization") != "" || (req.TLS != nil && len(req.TLS.PeerCertificates) > 0) {
		return nil, false, nil
	}
	if !slices.ContainsFunc(publicPaths, func(p string) bool {
		return req.URL.Path == p || strings.HasPrefix(req.URL.Path, p+"/")
	}) {
		return nil, false, nil
	}
	return &authenticator.Response{User: &user.DefaultInfo{Name: user.Anonymous, Groups: []string{user.AllUnauthenticated}}}, true, nil
}

// ensureTokenFile creates a token file with one token per built-in bearer
// identity (admin and viewer) unless it exists, and returns its tokens by
// user.
func ensureTokenFile(path string) (map[string]string, error) {
	if _, err := os.Stat(path); os.IsNotExist(err) {
		var b strings.Builder
		for _, id := range [][3]string{{AdminUser, "1", AdminGroup}, {ViewerUser, "2", ViewerGroup}} {
			fmt.Fprintf(&b, "%s,%s,%s,\"%s\"\n", randomToken(), id[0], id[1], id[2])
		}
		if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
			return nil, fmt.Errorf("write token file: %w", err)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	tokens := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Split(line, ","); len(f) >= 2 {
			tokens[f[1]] = f[0]
		}
	}
	return tokens, nil
}

func randomToken() string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return hex.EncodeToString(b)
}

// EnsureTokenFile creates the static token file at path when there is
// none (the admin's and the viewer's tokens), as a server does in its
// data directory; `svcnet up --control-planes` makes it once for all.
func EnsureTokenFile(path string) error {
	_, err := ensureTokenFile(path)
	return err
}
