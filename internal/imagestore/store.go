package imagestore

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sync/singleflight"
)

// Store is a content-addressed image store rooted at a directory. A Store
// is safe for concurrent use, and several Stores, in several processes,
// may share a root.
type Store struct {
	root string
	// pulls and layers join concurrent pulls of one image, and fetches of
	// one layer, within the process.
	pulls  singleflight.Group
	layers singleflight.Group
}

// Open opens the store at root, creating its directories if needed.
func Open(root string) (*Store, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	for _, d := range []string{"layers/sha256", "images", "locks", "tmp"} {
		if err := os.MkdirAll(filepath.Join(abs, d), 0o700); err != nil {
			return nil, fmt.Errorf("image store: %w", err)
		}
	}
	return &Store{root: abs}, nil
}

// Root is the store's directory.
func (s *Store) Root() string { return s.root }

// LayerDir is the overlayfs lower directory of the layer with this diffID
// ("sha256:…"); it exists once the layer has been pulled.
func (s *Store) LayerDir(diffID string) string {
	h, err := v1.NewHash(diffID)
	if err != nil {
		return ""
	}
	return filepath.Join(s.layerPath(h), "fs")
}

func (s *Store) layerPath(diffID v1.Hash) string {
	return filepath.Join(s.root, "layers", diffID.Algorithm, diffID.Hex)
}

// Get returns the image pulled earlier for ref, without the network: what
// imagePullPolicy IfNotPresent and Never look up. An image not pulled, or
// whose layers are gone, is ErrNotPresent.
func (s *Store) Get(ref string) (*Image, error) {
	r, err := parseRef(ref)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(s.recordPath(r.Name()))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotPresent, r.Name())
	}
	if err != nil {
		return nil, err
	}
	img := &Image{}
	if err := json.Unmarshal(b, img); err != nil {
		return nil, fmt.Errorf("image record of %s: %w", r.Name(), err)
	}
	if err := s.fillDirs(img); err != nil {
		return nil, err
	}
	return img, nil
}

// fillDirs sets each layer's Dir, checking that it is there.
func (s *Store) fillDirs(img *Image) error {
	for i := range img.Layers {
		dir := s.LayerDir(img.Layers[i].DiffID)
		if _, err := os.Stat(dir); err != nil {
			return fmt.Errorf("%w: %s: layer %s: %w", ErrNotPresent, img.Ref, img.Layers[i].DiffID, err)
		}
		img.Layers[i].Dir = dir
	}
	return nil
}

// recordPath is where the record of a reference name lives: names hold
// '/' and ':', so the file is named by their hash.
func (s *Store) recordPath(refName string) string {
	sum := sha256.Sum256([]byte(refName))
	return filepath.Join(s.root, "images", hex.EncodeToString(sum[:])+".json")
}

// saveImage records img under each of names, atomically each.
func (s *Store) saveImage(img *Image, names ...string) error {
	b, err := json.MarshalIndent(img, "", "  ")
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := writeFileAtomic(s.recordPath(n), b); err != nil {
			return fmt.Errorf("image record of %s: %w", n, err)
		}
	}
	return nil
}

// writeFileAtomic writes b to a temporary file beside path, syncs it and
// renames it over path: readers see the old file or the new one, whole.
func writeFileAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // fails harmlessly once renamed
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// parseRef parses a reference as the kubelet's runtimes do: Docker Hub
// and "library/" by default, tag "latest" if neither tag nor digest.
func parseRef(ref string) (name.Reference, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidReference, err)
	}
	return r, nil
}
