package imagestore

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"
)

// layerJob is one layer of an image to make present.
type layerJob struct {
	index    int // in the image, bottom first; for messages
	diffID   v1.Hash
	blob     v1.Descriptor
	src      *source
	progress func(Progress)
	file     string // the blob's name in an archive being loaded; for messages
}

// layerRecord is layers/sha256/<diffID>/layer.json.
type layerRecord struct {
	DiffID    string `json:"diffID"`
	Digest    string `json:"digest"`
	MediaType string `json:"mediaType"`
	Size      int64  `json:"size"`
}

// ensureLayer makes the layer present, fetching and unpacking it unless
// it is there. Goroutines asking for one layer share one fetch, run under
// the first one's context. Each returns only when that fetch has ended,
// so no work of a pull outlives it; one whose fetch ended because the
// first caller gave up tries again under its own context.
func (s *Store) ensureLayer(ctx context.Context, j layerJob) error {
	for {
		if s.hasLayer(j.diffID) {
			return nil
		}
		_, err, _ := s.layers.Do(j.diffID.String(), func() (any, error) {
			return nil, s.fetchLayer(ctx, j)
		})
		if err != nil && ctx.Err() == nil && isCanceled(err) {
			continue
		}
		return err
	}
}

func isCanceled(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

func (s *Store) hasLayer(diffID v1.Hash) bool {
	_, err := os.Lstat(s.layerPath(diffID))
	return err == nil
}

// fetchLayer fetches, verifies and unpacks the layer under its lock, into
// a temporary directory that is renamed into place only when complete.
func (s *Store) fetchLayer(ctx context.Context, j layerJob) error {
	key := "layer-" + j.diffID.Hex
	unlock, err := s.lock(ctx, key)
	if err != nil {
		return err
	}
	defer unlock()
	// Another process may have finished it while this one waited.
	if s.hasLayer(j.diffID) {
		return nil
	}
	if err := s.removeStale(key + "-"); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Join(s.root, "tmp"), key+"-")
	if err != nil {
		return err
	}
	// Once renamed, tmp is gone and this removes nothing.
	defer os.RemoveAll(tmp)

	rc, err := j.src.blob(ctx, j.blob.Digest)
	if err != nil {
		return err
	}
	defer rc.Close()
	if _, err := unpackVerified(rc, filepath.Join(tmp, "fs"), j); err != nil {
		return err
	}
	rec, err := json.Marshal(layerRecord{
		DiffID: j.diffID.String(), Digest: j.blob.Digest.String(),
		MediaType: string(j.blob.MediaType), Size: j.blob.Size,
	})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, "layer.json"), rec, 0o644); err != nil {
		return err
	}
	// The rename publishes the layer as complete; its content must reach
	// the disk first, or a crash could leave a published, empty layer.
	if err := syncFS(tmp); err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o711); err != nil {
		return err
	}
	return os.Rename(tmp, s.layerPath(j.diffID))
}

// removeStale removes the temporary directories a crashed holder of the
// lock left; the caller holds the lock, so no one is writing them.
func (s *Store) removeStale(prefix string) error {
	entries, err := os.ReadDir(filepath.Join(s.root, "tmp"))
	if err != nil {
		return err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			if err := os.RemoveAll(filepath.Join(s.root, "tmp", e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}

func syncFS(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Syncfs(int(f.Fd()))
}
