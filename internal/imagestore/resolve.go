package imagestore

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// resolved is a reference resolved at one endpoint to an image manifest
// for the platform, and the endpoint to fetch its blobs from.
type resolved struct {
	src            *source
	digest         v1.Hash // what the reference points at, index or manifest
	manifestDigest v1.Hash
	platform       v1.Platform
	img            v1.Image
}

// endpoint is a host serving the registry's repositories: a mirror or the
// registry itself.
type endpoint struct {
	host     string
	insecure bool
}

// endpoints lists the mirrors of the registry host, in order, then the
// registry.
func endpoints(registry string, o *PullOptions) []endpoint {
	var mirrors []string
	if isDockerHub(registry) {
		for _, h := range dockerHubHosts {
			mirrors = append(mirrors, o.Mirrors[h]...)
		}
	} else {
		mirrors = o.Mirrors[registry]
	}
	var eps []endpoint
	for _, m := range append(mirrors, registry) {
		ep := endpoint{host: m}
		switch {
		case strings.HasPrefix(m, "http://"):
			ep = endpoint{host: strings.TrimPrefix(m, "http://"), insecure: true}
		case strings.HasPrefix(m, "https://"):
			ep.host = strings.TrimPrefix(m, "https://")
		}
		ep.host = strings.TrimSuffix(ep.host, "/")
		if slices.Contains(o.Insecure, ep.host) {
			ep.insecure = true
		}
		eps = append(eps, ep)
	}
	return eps
}

// resolve tries the endpoints in order and returns the first that
// resolves the reference. When all fail, the registry's own error is the
// one returned (and classified), the mirrors' are named in its message.
func resolve(ctx context.Context, ref name.Reference, o *PullOptions, kc authn.Keychain) (*resolved, error) {
	eps := endpoints(ref.Context().RegistryStr(), o)
	var mirrorErrs []string
	for i, ep := range eps {
		r, err := resolveAt(ctx, ref, ep, o, kc)
		if err == nil {
			return r, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if i < len(eps)-1 {
			mirrorErrs = append(mirrorErrs, fmt.Sprintf("mirror %s: %v", ep.host, err))
			continue
		}
		if len(mirrorErrs) > 0 {
			return nil, fmt.Errorf("%w (after %s)", err, strings.Join(mirrorErrs, "; "))
		}
		return nil, err
	}
	panic("unreachable: endpoints always lists the registry")
}

// resolveAt resolves the reference at one endpoint.
func resolveAt(ctx context.Context, ref name.Reference, ep endpoint, o *PullOptions, kc authn.Keychain) (*resolved, error) {
	var nopts []name.Option
	if ep.insecure {
		nopts = append(nopts, name.Insecure)
	}
	reg, err := name.NewRegistry(ep.host, nopts...)
	if err != nil {
		return nil, fmt.Errorf("%w: endpoint %q: %w", ErrInvalidReference, ep.host, err)
	}
	repo := reg.Repo(ref.Context().RepositoryStr())
	var at name.Reference = repo.Tag(ref.Identifier())
	if d, ok := ref.(name.Digest); ok {
		at = repo.Digest(d.DigestStr())
	}
	base := o.Transport
	if base == nil {
		base = remote.DefaultTransport
	}
	ropts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(kc), remote.WithTransport(base)}

	top, err := remote.Get(at, ropts...)
	if err != nil {
		return nil, classify(err)
	}
	want := nodePlatform()
	if o.Platform != nil {
		want = *o.Platform
	}
	desc := top
	if top.MediaType.IsIndex() {
		idx, err := top.ImageIndex()
		if err != nil {
			return nil, classify(err)
		}
		im, err := idx.IndexManifest()
		if err != nil {
			return nil, err
		}
		child, err := choosePlatform(ref.Name(), im, want)
		if err != nil {
			return nil, err
		}
		if desc, err = remote.Get(repo.Digest(child.Digest.String()), ropts...); err != nil {
			return nil, classify(err)
		}
		if !desc.MediaType.IsImage() {
			return nil, fmt.Errorf("%s: the index's manifest for %s is a %s, not an image", ref.Name(), want.String(), desc.MediaType)
		}
	}
	img, err := desc.Image()
	if err != nil {
		return nil, classify(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, classify(err)
	}
	// A single manifest names its platform only in its config; refuse one
	// built for another, as containerd does, rather than fail at exec.
	got := v1.Platform{OS: cfg.OS, Architecture: cfg.Architecture, Variant: cfg.Variant}
	if got.OS != "" && got.Architecture != "" && !platformMatches(got, want) {
		return nil, fmt.Errorf("%w: %s is for %s; this node is %s", ErrPlatform, ref.Name(), got.String(), want.String())
	}
	return &resolved{
		src:            &source{repo: repo, keychain: kc, base: base},
		digest:         top.Digest,
		manifestDigest: desc.Digest,
		platform:       got,
		img:            img,
	}, nil
}
