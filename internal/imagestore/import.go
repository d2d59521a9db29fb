package imagestore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	goruntime "runtime"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Import adds an image made on this machine, not pulled, to the store:
// layers are its uncompressed tar streams, bottom first, each unpacked as
// a pulled layer is (and shared with pulled images by diffID). The image
// is recorded under ref, so that Get finds it, and under its ID, which is
// the repository at a digest of the config and the layers' diffIDs (an
// imported image has no registry manifest).
//
// It is what tests build images with, without a registry; Load reads
// images from archives.
func (s *Store) Import(ctx context.Context, ref string, cfg Config, layers []io.Reader) (*Image, error) {
	r, err := parseRef(ref)
	if err != nil {
		return nil, err
	}
	img := &Image{Ref: r.Name(), Config: cfg, Platform: goruntime.GOOS + "/" + goruntime.GOARCH}
	for i, l := range layers {
		diffID, size, err := s.importLayer(ctx, l)
		if err != nil {
			return nil, fmt.Errorf("importing %s: layer %d: %w", r.Name(), i, err)
		}
		img.Layers = append(img.Layers, Layer{DiffID: diffID.String(), Digest: diffID.String(), Size: size})
		img.Size += size
	}
	// The digest stands for the config blob a registry would hold: it
	// changes with anything that makes the image run differently.
	b, err := json.Marshal(struct {
		Config  Config   `json:"config"`
		DiffIDs []string `json:"diffIDs"`
	}{cfg, diffIDs(img.Layers)})
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	img.Digest = "sha256:" + hex.EncodeToString(sum[:])
	img.ManifestDigest, img.ConfigDigest = img.Digest, img.Digest
	img.ID = r.Context().Digest(img.Digest).Name()
	if err := s.saveImage(img, r.Name(), img.ID); err != nil {
		return nil, err
	}
	if err := s.fillDirs(img); err != nil {
		return nil, err
	}
	return img, nil
}

func diffIDs(layers []Layer) []string {
	out := make([]string, len(layers))
	for i, l := range layers {
		out[i] = l.DiffID
	}
	return out
}

// importLayer unpacks one tar stream into tmp/, hashing it, and publishes
// it under its diffID unless that layer is already there. The diffID is
// known only at the end, so the lock is taken then, around the rename.
func (s *Store) importLayer(ctx context.Context, r io.Reader) (v1.Hash, int64, error) {
	tmp, err := os.MkdirTemp(filepath.Join(s.root, "tmp"), "import-")
	if err != nil {
		return v1.Hash{}, 0, err
	}
	// Once renamed, tmp is gone and this removes nothing.
	defer os.RemoveAll(tmp)
	h := sha256.New()
	counted := &countingReader{r: r, report: func(int64) {}}
	tr := io.TeeReader(counted, h)
	if err := unpack(tr, filepath.Join(tmp, "fs")); err != nil {
		return v1.Hash{}, 0, err
	}
	// The end-of-archive blocks count in the diffID.
	if _, err := io.Copy(io.Discard, tr); err != nil {
		return v1.Hash{}, 0, err
	}
	diffID := v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(h.Sum(nil))}
	unlock, err := s.lock(ctx, "layer-"+diffID.Hex)
	if err != nil {
		return v1.Hash{}, 0, err
	}
	defer unlock()
	if s.hasLayer(diffID) {
		return diffID, counted.n, nil
	}
	rec, err := json.Marshal(layerRecord{DiffID: diffID.String(), Digest: diffID.String(),
		MediaType: "application/vnd.oci.image.layer.v1.tar", Size: counted.n})
	if err != nil {
		return v1.Hash{}, 0, err
	}
	if err := os.WriteFile(filepath.Join(tmp, "layer.json"), rec, 0o644); err != nil {
		return v1.Hash{}, 0, err
	}
	// As for a pulled layer: complete on disk before it is published.
	if err := syncFS(tmp); err != nil {
		return v1.Hash{}, 0, err
	}
	if err := os.Chmod(tmp, 0o711); err != nil {
		return v1.Hash{}, 0, err
	}
	return diffID, counted.n, os.Rename(tmp, s.layerPath(diffID))
}
