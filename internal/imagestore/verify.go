package imagestore

import (
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/klauspost/compress/zstd"
)

// unpackVerified reads the layer's blob from r and unpacks it into dir,
// checking the blob against its digest and size and the uncompressed tar
// against the diffID, and returns the blob's digest. A blob of no known
// digest (the zero Hash: a `docker save` layer.tar) is checked by its
// size and diffID alone. Digests are computed as the bytes stream
// through, so the blob is never stored; on any error dir holds a partial
// tree the caller discards.
func unpackVerified(r io.Reader, dir string, j layerJob) (v1.Hash, error) {
	what := fmt.Sprintf("layer %d (diffID %s)", j.index, j.diffID)
	if j.file != "" {
		what = fmt.Sprintf("layer %d (%s, diffID %s)", j.index, j.file, j.diffID)
	}
	blobHash := sha256.New()
	counted := &countingReader{r: io.LimitReader(r, j.blob.Size+1), report: func(n int64) {
		if j.progress != nil {
			j.progress(Progress{DiffID: j.diffID.String(), Done: n, Total: j.blob.Size})
		}
	}}
	blob := bufio.NewReader(io.TeeReader(counted, blobHash))

	tarHash := sha256.New()
	tarStream, closeDec, err := decompress(blob)
	var unpackErr error
	if err != nil {
		unpackErr = err
	} else {
		defer closeDec()
		tr := io.TeeReader(tarStream, tarHash)
		unpackErr = unpack(tr, dir)
		if unpackErr == nil {
			// The end-of-archive blocks and any padding after them count
			// in the diffID.
			_, unpackErr = io.Copy(io.Discard, tr)
		}
	}
	// Read the blob to its end whatever happened, so that a corrupt blob
	// is reported as one rather than as the garbage it unpacked to.
	if _, err := io.Copy(io.Discard, blob); err != nil {
		return v1.Hash{}, classify(fmt.Errorf("%s: reading blob %s: %w", what, j.blob.Digest, err))
	}
	got := v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(blobHash.Sum(nil))}
	if j.blob.Digest != (v1.Hash{}) && got != j.blob.Digest {
		return v1.Hash{}, &mismatchError{what: what + " blob", want: j.blob.Digest.String(), got: got.String()}
	}
	if counted.n != j.blob.Size {
		return v1.Hash{}, fmt.Errorf("%w: %s blob %s: %d bytes, the manifest says %d", ErrVerify, what, got, counted.n, j.blob.Size)
	}
	if unpackErr != nil {
		return v1.Hash{}, fmt.Errorf("%s: %w", what, unpackErr)
	}
	if got := digestOf(tarHash); got != j.diffID.String() {
		return v1.Hash{}, &mismatchError{what: what + " content", want: j.diffID.String(), got: got}
	}
	return got, nil
}

// decompress sniffs the stream's compression from its first bytes rather
// than trusting the media type: gzip, zstd, or none.
func decompress(r *bufio.Reader) (io.Reader, func(), error) {
	magic, err := r.Peek(4)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, nil, err
	}
	switch {
	case len(magic) >= 2 && magic[0] == 0x1f && magic[1] == 0x8b:
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, nil, err
		}
		return zr, func() { zr.Close() }, nil
	case len(magic) == 4 && magic[0] == 0x28 && magic[1] == 0xb5 && magic[2] == 0x2f && magic[3] == 0xfd:
		zr, err := zstd.NewReader(r)
		if err != nil {
			return nil, nil, err
		}
		return zr, zr.Close, nil
	default:
		return r, func() {}, nil
	}
}

func digestOf(h hash.Hash) string {
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// countingReader counts the bytes read and reports the count.
type countingReader struct {
	r      io.Reader
	n      int64
	report func(n int64)
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 {
		c.n += int64(n)
		c.report(c.n)
	}
	return n, err
}

// mismatchError reports content that is not what its digest says.
type mismatchError struct {
	what      string // e.g. "layer 2 (diffID sha256:…) blob"
	want, got string
}

func (e *mismatchError) Error() string {
	return fmt.Sprintf("%s: digest mismatch: want %s, got %s", e.what, e.want, e.got)
}

func (e *mismatchError) Unwrap() error { return ErrVerify }
