package imagestore

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// source fetches blobs from the endpoint that resolved the reference.
// Blobs are fetched here rather than through remote's layers so that the
// store sees the bytes as they arrive (progress) and verifies them itself,
// naming the layer and both digests on a mismatch.
type source struct {
	repo     name.Repository
	keychain authn.Keychain
	base     http.RoundTripper

	mu     sync.Mutex
	client *http.Client // authenticated for pulls from repo, made on first use
}

func (s *source) httpClient(ctx context.Context) (*http.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client != nil {
		return s.client, nil
	}
	auth, err := authn.Resolve(ctx, s.keychain, s.repo)
	if err != nil {
		return nil, err
	}
	// transport pings the registry and exchanges credentials for a
	// bearer token when the registry asks for one.
	rt, err := transport.NewWithContext(ctx, s.repo.Registry, auth, s.base, []string{s.repo.Scope(transport.PullScope)})
	if err != nil {
		return nil, classify(err)
	}
	s.client = &http.Client{Transport: rt}
	return s.client, nil
}

// blob opens the blob's content. The caller verifies it.
func (s *source) blob(ctx context.Context, digest v1.Hash) (io.ReadCloser, error) {
	c, err := s.httpClient(ctx)
	if err != nil {
		return nil, err
	}
	u := url.URL{
		Scheme: s.repo.Scheme(),
		Host:   s.repo.RegistryStr(),
		Path:   fmt.Sprintf("/v2/%s/blobs/%s", s.repo.RepositoryStr(), digest),
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, classify(err)
	}
	if err := transport.CheckError(resp, http.StatusOK); err != nil {
		resp.Body.Close()
		return nil, classify(err)
	}
	return resp.Body, nil
}
