package imagestore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sync/errgroup"
)

// layerJobs is how many layers of one image are fetched at once.
const layerJobs = 3

// Pull fetches the image ref names, resolved to the platform, unpacks
// the layers the store lacks and records the image. It always asks the
// registry (imagePullPolicy Always); Get answers from the store alone.
//
// Concurrent pulls in the process of one reference with the same options
// share one pull; the returned Image is the caller's own.
func (s *Store) Pull(ctx context.Context, ref string, opts PullOptions) (*Image, error) {
	r, err := parseRef(ref)
	if err != nil {
		return nil, err
	}
	kc, err := newKeychain(opts.PullSecrets)
	if err != nil {
		return nil, err
	}
	key, err := pullKey(r, &opts)
	if err != nil {
		return nil, err
	}
	// As for layers (ensureLayer): one pull per key at a time, retried by
	// a caller whose own context is live if the first one's ended it.
	for {
		v, err, _ := s.pulls.Do(key, func() (any, error) {
			return s.pull(ctx, r, &opts, kc)
		})
		if err != nil && ctx.Err() == nil && isCanceled(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("pulling %s: %w", r.Name(), err)
		}
		img := *v.(*Image)
		img.Layers = slices.Clone(img.Layers)
		return &img, nil
	}
}

// pullKey tells pulls apart that may not share a result: another secret
// may be refused where this one is let in.
func pullKey(r name.Reference, o *PullOptions) (string, error) {
	b, err := json.Marshal(struct {
		Secrets  [][]byte
		Mirrors  map[string][]string
		Insecure []string
		Platform *v1.Platform
	}{o.PullSecrets, o.Mirrors, o.Insecure, o.Platform})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return r.Name() + " " + hex.EncodeToString(sum[:]), nil
}

func (s *Store) pull(ctx context.Context, r name.Reference, o *PullOptions, kc *keychain) (*Image, error) {
	res, err := resolve(ctx, r, o, kc)
	if err != nil {
		return nil, err
	}
	m, err := res.img.Manifest()
	if err != nil {
		return nil, classify(err)
	}
	cfg, err := res.img.ConfigFile()
	if err != nil {
		return nil, classify(err)
	}
	if len(cfg.RootFS.DiffIDs) != len(m.Layers) {
		return nil, fmt.Errorf("%w: manifest %s has %d layers, its config %d diffIDs", ErrVerify, res.manifestDigest, len(m.Layers), len(cfg.RootFS.DiffIDs))
	}

	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(layerJobs)
	for i, blob := range m.Layers {
		j := layerJob{index: i, diffID: cfg.RootFS.DiffIDs[i], blob: blob, src: res.src, progress: o.Progress}
		g.Go(func() error { return s.ensureLayer(gctx, j) })
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}

	img := &Image{
		Ref:            r.Name(),
		ID:             r.Context().Digest(res.digest.String()).Name(),
		Digest:         res.digest.String(),
		ManifestDigest: res.manifestDigest.String(),
		ConfigDigest:   m.Config.Digest.String(),
		Platform:       res.platform.String(),
		Config:         runConfig(cfg.Config),
		Size:           m.Config.Size,
	}
	for i, blob := range m.Layers {
		img.Layers = append(img.Layers, Layer{DiffID: cfg.RootFS.DiffIDs[i].String(), Digest: blob.Digest.String(), Size: blob.Size})
		img.Size += blob.Size
	}
	// Recorded under every name Get may be asked: the reference, the
	// repository at the digest it resolved to, and at the platform's
	// manifest.
	names := []string{r.Name(), img.ID}
	if res.manifestDigest != res.digest {
		names = append(names, r.Context().Digest(res.manifestDigest.String()).Name())
	}
	if err := s.saveImage(img, names...); err != nil {
		return nil, err
	}
	if err := s.fillDirs(img); err != nil {
		return nil, err
	}
	return img, nil
}

func runConfig(c v1.Config) Config {
	rc := Config{
		Entrypoint: c.Entrypoint,
		Cmd:        c.Cmd,
		Env:        c.Env,
		WorkingDir: c.WorkingDir,
		User:       c.User,
	}
	for p := range c.ExposedPorts {
		rc.ExposedPorts = append(rc.ExposedPorts, p)
	}
	slices.Sort(rc.ExposedPorts)
	return rc
}
