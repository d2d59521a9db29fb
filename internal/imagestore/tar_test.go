package imagestore

import (
	"archive/tar"
	"bytes"
	"io"
	"testing"
	"time"
)

// testMtime is every test entry's modification time.
var testMtime = time.Unix(1700000000, 0)

// tarEntry is one entry of a test layer: a header and, for a regular
// file, its content.
type tarEntry struct {
	hdr  tar.Header
	body string
}

func tDir(name string, mode int64) tarEntry {
	return tarEntry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode, ModTime: testMtime}}
}

func tFile(name, body string, mode int64) tarEntry {
	return tarEntry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(body)), ModTime: testMtime}, body: body}
}

func tSymlink(name, target string) tarEntry {
	return tarEntry{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, Mode: 0o777, ModTime: testMtime}}
}

func tHardlink(name, target string) tarEntry {
	return tarEntry{hdr: tar.Header{Typeflag: tar.TypeLink, Name: name, Linkname: target, ModTime: testMtime}}
}

// tarOf writes the entries as a PAX tar stream (PAX for the xattrs).
func tarOf(t *testing.T, entries ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := e.hdr
		hdr.Format = tar.FormatPAX
		if err := tw.WriteHeader(&hdr); err != nil {
			t.Fatalf("tar header %s: %v", hdr.Name, err)
		}
		if _, err := io.WriteString(tw, e.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
