package proxy

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
)

// TestCopyAnswer: the body goes whole, read in pieces no larger than the
// room the client's socket had for them, nor than a pool's buffer; a
// failure of the room, the body or the write ends the copy with it.
func TestCopyAnswer(t *testing.T) {
	failed := errors.New("failed")
	for _, tt := range []struct {
		name    string
		size    int
		rooms   []int // what room returns in turn, the last one after
		roomErr error
		bodyErr error
		writeOK int   // bytes the writer takes before it fails; 0: all
		reads   []int // the sizes asked of the body
		err     error
	}{
		{"room for all", 5, []int{1 << 30}, nil, nil, 0, []int{32 << 10, 32 << 10}, nil},
		{"a buffer at a time", 80 << 10, []int{1 << 30}, nil, nil, 0, []int{32 << 10, 32 << 10, 32 << 10, 32 << 10}, nil},
		{"by the room", 10 << 10, []int{1 << 10, 4 << 10, 64 << 10}, nil, nil, 0, []int{1 << 10, 4 << 10, 32 << 10, 32 << 10}, nil},
		{"room fails", 10 << 10, nil, failed, nil, 0, nil, failed},
		{"body fails", 10 << 10, []int{1 << 30}, nil, failed, 0, []int{32 << 10, 32 << 10}, failed},
		{"write fails", 10 << 10, []int{4 << 10}, nil, nil, 4 << 10, []int{4 << 10, 4 << 10}, failed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body := &recordingReader{r: io.MultiReader(strings.NewReader(strings.Repeat("x", tt.size)), errReader{tt.bodyErr})}
			var out bytes.Buffer
			w := &failingWriter{w: &out, ok: tt.writeOK, err: failed}
			turn := 0
			room := func() (int, error) {
				if tt.roomErr != nil {
					return 0, tt.roomErr
				}
				n := tt.rooms[min(turn, len(tt.rooms)-1)]
				turn++
				return n, nil
			}
			err := copyAnswer(w, body, room)
			if !errors.Is(err, tt.err) {
				t.Fatalf("err %v, want %v", err, tt.err)
			}
			if tt.reads != nil && !slices.Equal(body.reads, tt.reads) {
				t.Errorf("reads asked for %v bytes, want %v", body.reads, tt.reads)
			}
			if tt.err == nil && out.Len() != tt.size {
				t.Errorf("%d bytes written, want %d", out.Len(), tt.size)
			}
		})
	}
}

// recordingReader records the size of each read asked of it.
type recordingReader struct {
	r     io.Reader
	reads []int
}

func (r *recordingReader) Read(p []byte) (int, error) {
	r.reads = append(r.reads, len(p))
	return r.r.Read(p)
}

// errReader fails with its error, or ends.
type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	return 0, io.EOF
}

// failingWriter takes ok bytes (all if 0), then fails.
type failingWriter struct {
	w   io.Writer
	ok  int
	n   int
	err error
}

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.ok > 0 && w.n+len(p) > w.ok {
		return 0, w.err
	}
	w.n += len(p)
	return w.w.Write(p)
}
