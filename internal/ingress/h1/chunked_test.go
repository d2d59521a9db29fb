package h1

import (
	"bytes"
	"io"
	"net/http/httputil"
	"strings"
	"testing"
)

// readChunks feeds b to a Chunks in pieces of at most step bytes, as
// reads from a socket would bring it, keeping what it leaves unread.
func readChunks(b []byte, step int) (data []byte, done bool, err error) {
	var c Chunks
	var buf []byte
	for len(b) > 0 || len(buf) > 0 {
		if len(b) > 0 {
			n := min(step, len(b))
			buf, b = append(buf, b[:n]...), b[n:]
		}
		for {
			used, d, end, err := c.Next(buf)
			buf = buf[used:]
			data = append(data, d...)
			if err != nil || end {
				return data, end, err
			}
			if used == 0 {
				break
			}
		}
		if len(b) == 0 {
			break
		}
	}
	return data, false, nil
}

func TestChunks(t *testing.T) {
	tests := []struct {
		name string
		body string
		data string
		done bool
		err  bool
	}{
		{name: "chunks", body: "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n", data: "abcde", done: true},
		{name: "upper-case hex and extensions", body: "A;name=v\r\n0123456789\r\n0;x\r\n\r\n", data: "0123456789", done: true},
		{name: "trailer skipped", body: "1\r\nx\r\n0\r\nX-Trailer: t\r\nX-Other: o\r\n\r\n", data: "x", done: true},
		{name: "spaces before the line end", body: "1 \r\nx\r\n0\r\n\r\n", data: "x", done: true},
		{name: "not ended yet", body: "3\r\nabc\r\n", data: "abc"},
		{name: "bare LF", body: "3\nabc\r\n0\r\n\r\n", err: true},
		{name: "no size", body: "\r\nabc\r\n", err: true},
		{name: "not hex", body: "xyz\r\nabc\r\n", err: true},
		{name: "size too long", body: "1000000000000000\r\n", err: true},
		{name: "data longer than its size", body: "2\r\nabc\r\n0\r\n\r\n", data: "ab", err: true},
		{name: "size line over the limit", body: strings.Repeat("0", maxChunkLine+1), err: true},
		{name: "trailer too long", body: "0\r\n" + strings.Repeat("X: y\r\n", maxTrailer+1) + "\r\n", err: true},
	}
	for _, tt := range tests {
		for _, step := range []int{1, 2, 7, len(tt.body)} {
			data, done, err := readChunks([]byte(tt.body), step)
			if string(data) != tt.data || done != tt.done || (err != nil) != tt.err {
				t.Errorf("%s, %d bytes at a time: data %q done %v err %v; want %q %v error %v", tt.name, step, data, done, err, tt.data, tt.done, tt.err)
			}
		}
	}
}

// FuzzChunks checks Chunks against net/http's chunked reader: a body it
// reads to its end, net/http reads to the same data.
func FuzzChunks(f *testing.F) {
	f.Add([]byte("3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"), 3)
	f.Add([]byte("1;e=1\r\nx\r\n0\r\nT: 1\r\n\r\n"), 1)
	f.Fuzz(func(t *testing.T, b []byte, step int) {
		step = max(step%64, 1)
		data, done, err := readChunks(b, step)
		if err != nil || !done {
			return
		}
		want, werr := io.ReadAll(httputil.NewChunkedReader(bytes.NewReader(b)))
		if werr != nil {
			t.Fatalf("Chunks read %q from %q, net/http fails: %v", data, b, werr)
		}
		if !bytes.Equal(data, want) {
			t.Fatalf("Chunks read %q from %q, net/http %q", data, b, want)
		}
	})
}

func TestAppendChunk(t *testing.T) {
	var b []byte
	b = AppendChunk(b, []byte("hello"))
	b = AppendChunk(b, nil) // nothing: an empty chunk would end the body
	b = AppendChunk(b, bytes.Repeat([]byte("x"), 26))
	b = append(b, LastChunk...)
	got, err := io.ReadAll(httputil.NewChunkedReader(bytes.NewReader(b)))
	if err != nil || string(got) != "hello"+strings.Repeat("x", 26) {
		t.Fatalf("%q: read %q, %v", b, got, err)
	}
}
