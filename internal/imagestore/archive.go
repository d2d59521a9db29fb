package imagestore

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// maxArchiveJSON bounds what Load reads of an archive's JSON files
// (manifest.json, index.json, manifests, configs) into memory.
const maxArchiveJSON = 32 << 20

// imageArchive is an image archive's tar, indexed: where each regular
// file's content lies, read in place, and where its links lead.
type imageArchive struct {
	r     io.ReaderAt
	files map[string]archiveFile
	// links maps a symlink's or hard link's name to its target's: `docker
	// save` links a layer.tar it has written already.
	links map[string]string
}

type archiveFile struct{ off, size int64 }

// cleanArchiveName is a tar entry's name relative to the archive's root:
// "./manifest.json" and "/manifest.json" are "manifest.json". The names
// are only keys: nothing is written under them.
func cleanArchiveName(n string) string {
	return strings.TrimPrefix(path.Clean("/"+n), "/")
}

// indexArchive reads the tar's headers (seeking over the content) and
// notes where each file is. A stream that is not a tar, or ends within
// an entry, is ErrArchive.
func indexArchive(r io.ReaderAt, size int64) (*imageArchive, error) {
	a := &imageArchive{r: r, files: map[string]archiveFile{}, links: map[string]string{}}
	sr := io.NewSectionReader(r, 0, size)
	tr := tar.NewReader(sr)
	for entries := 0; ; entries++ {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			if entries == 0 {
				return nil, fmt.Errorf("%w: empty: no tar entry", ErrArchive)
			}
			return a, nil
		}
		switch {
		case err == nil:
		case entries == 0:
			return nil, fmt.Errorf("%w: not a tar archive: %v", ErrArchive, err)
		case errors.Is(err, io.ErrUnexpectedEOF):
			return nil, fmt.Errorf("%w: truncated: the tar ends within an entry (%v)", ErrArchive, err)
		default:
			return nil, fmt.Errorf("%w: reading the tar: %v", ErrArchive, err)
		}
		name := cleanArchiveName(hdr.Name)
		switch hdr.Typeflag {
		// archive/tar reports old tools' TypeRegA as TypeReg.
		case tar.TypeReg:
			// The tar reader stops right after the header: the content
			// starts here.
			off, err := sr.Seek(0, io.SeekCurrent)
			if err != nil {
				return nil, err
			}
			a.files[name] = archiveFile{off: off, size: hdr.Size}
		case tar.TypeSymlink:
			target := hdr.Linkname
			if !path.IsAbs(target) {
				target = path.Join(path.Dir(name), target)
			}
			a.links[name] = cleanArchiveName(target)
		case tar.TypeLink:
			a.links[name] = cleanArchiveName(hdr.Linkname)
		}
	}
}

// stat finds a file by name, following links.
func (a *imageArchive) stat(name string) (archiveFile, bool) {
	name = cleanArchiveName(name)
	for range 16 {
		if f, ok := a.files[name]; ok {
			return f, true
		}
		target, ok := a.links[name]
		if !ok {
			break
		}
		name = target
	}
	return archiveFile{}, false
}

// open gives a file's content.
func (a *imageArchive) open(name string) (*io.SectionReader, bool) {
	f, ok := a.stat(name)
	if !ok {
		return nil, false
	}
	return io.NewSectionReader(a.r, f.off, f.size), true
}

func (a *imageArchive) has(name string) bool {
	_, ok := a.stat(name)
	return ok
}

// readFile reads a small file whole: a JSON document.
func (a *imageArchive) readFile(name string) ([]byte, error) {
	r, ok := a.open(name)
	if !ok {
		return nil, fmt.Errorf("%w: %s is not in the archive", ErrArchive, name)
	}
	if r.Size() > maxArchiveJSON {
		return nil, fmt.Errorf("%w: %s: %d bytes, more than the %d a manifest or config may have", ErrArchive, name, r.Size(), maxArchiveJSON)
	}
	return io.ReadAll(r)
}

// archiveReader gives random access to the archive's tar: a regular file
// that is a tar is read in place; a stream (stdin), or an archive
// compressed whole (gzip, zstd: `docker save | gzip`), is copied, plain,
// into tmp/ first. cleanup removes the copy.
func (s *Store) archiveReader(ctx context.Context, r io.Reader) (ra io.ReaderAt, size int64, cleanup func(), err error) {
	if f, ok := r.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			magic := make([]byte, 4)
			n, _ := f.ReadAt(magic, 0)
			if !isCompressed(magic[:n]) {
				return f, st.Size(), func() {}, nil
			}
			r = io.NewSectionReader(f, 0, st.Size())
		}
	}
	spool, err := os.CreateTemp(filepath.Join(s.root, "tmp"), "load-archive-")
	if err != nil {
		return nil, 0, nil, err
	}
	cleanup = func() {
		spool.Close()
		os.Remove(spool.Name())
	}
	plain, closeDec, err := decompress(bufio.NewReader(ctxReader{ctx, r}))
	if err != nil {
		cleanup()
		return nil, 0, nil, fmt.Errorf("%w: %v", ErrArchive, err)
	}
	defer closeDec()
	size, err = io.Copy(spool, plain)
	if err != nil {
		cleanup()
		if ctx.Err() != nil {
			return nil, 0, nil, ctx.Err()
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, 0, nil, fmt.Errorf("%w: truncated: the compressed stream ends early (%v)", ErrArchive, err)
		}
		return nil, 0, nil, fmt.Errorf("%w: reading the archive: %v", ErrArchive, err)
	}
	return spool, size, cleanup, nil
}

// isCompressed tells gzip and zstd from their first bytes, as decompress
// does.
func isCompressed(magic []byte) bool {
	return bytes.HasPrefix(magic, []byte{0x1f, 0x8b}) || bytes.HasPrefix(magic, []byte{0x28, 0xb5, 0x2f, 0xfd})
}

// ctxReader fails its reads once ctx is done: a load of a large archive
// stops between two reads.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
