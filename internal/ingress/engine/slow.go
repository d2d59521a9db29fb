package engine

import (
	"bufio"
	"bytes"
	"io"
	"math"
	"net"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/svcnet/svcnet/internal/ingress/h1"
	"github.com/svcnet/svcnet/internal/ingress/upstream"
)

// toGoroutine moves an answer whose head h1 declines, with its pod and
// client connections, to a goroutine where net/http's response reader
// reads it; the client connection then comes back to a loop.
func (c *conn) toGoroutine() {
	e, pc := c.l.e, c.pod
	pending := append([]byte(nil), pc.buf[pc.off:]...)
	pc.buf, c.resp = nil, h1.Response{} // the goroutine reads through a buffer of its own
	c.l.unregister(pc.fd)
	pnc, perr := fileConn(pc.fd)
	pc.fd, pc.c, c.pod = -1, nil, nil
	rest := append([]byte(nil), c.in[c.headLen:]...)
	x := c.x // its head stays in c.in, which nothing reuses now
	readBy := x.Began.Add(c.readTimeout())
	release := c.release
	nc, err := c.detach()
	if err != nil || perr != nil {
		for _, o := range []net.Conn{nc, pnc} {
			if o != nil {
				o.Close()
			}
		}
		release()
		return
	}
	e.track(nc, pnc)
	go func() {
		defer e.untrack(nc, pnc)
		var keep bool
		client := WithWriteTimeout(nc, e.o.Write, e.h.WriteTimedOut)
		x.Status, x.Bytes, keep = slowAnswer(client, pnc, pending, &x.Head, readBy)
		e.h.Done(&x)
		if keep && !x.Head.Close && !e.closing.Load() {
			e.Serve(nc, rest, release)
			return
		}
		nc.Close()
		release()
	}()
}

// slowAnswer passes on the pod's answer to the request head, with
// pending read from the pod already, and closes the pod's connection.
// keep false: the client's connection is to be closed (half an answer
// went, or none could).
func slowAnswer(client, pod net.Conn, pending []byte, head *h1.Request, readBy time.Time) (status int, n int64, keep bool) {
	defer pod.Close()
	br := bufio.NewReaderSize(io.MultiReader(bytes.NewReader(pending), pod), podBuffer)
	w := bufio.NewWriterSize(client, clientBuffer)
	method := string(head.Method)
	_ = pod.SetReadDeadline(readBy)
	var resp *http.Response
	var err error
	for {
		resp, err = http.ReadResponse(br, &http.Request{Method: method})
		if err != nil {
			status, text := upstream.GatewayError(err)
			_, _ = w.Write(h1.AppendError(nil, status, text, method == "HEAD", head.Close))
			return status, 0, w.Flush() == nil
		}
		if resp.StatusCode >= 200 {
			break
		}
		resp.Body.Close()
	}
	defer resp.Body.Close()
	_ = pod.SetReadDeadline(time.Time{})
	for _, v := range resp.Header["Connection"] {
		for f := range strings.SplitSeq(v, ",") {
			if f = textproto.TrimString(f); f != "" {
				resp.Header.Del(f)
			}
		}
	}
	for _, h := range h1.HopByHop {
		resp.Header.Del(h)
	}
	resp.Header.Del("Content-Length") // written below
	// The standard reason: the pod's may hold what h1 declined.
	_, _ = w.WriteString("HTTP/1.1 " + strconv.Itoa(resp.StatusCode) + " " + http.StatusText(resp.StatusCode) + "\r\n")
	_ = resp.Header.Write(w)
	noBody := h1.NoBody(head.Method, resp.StatusCode)
	switch {
	case resp.ContentLength >= 0 && resp.StatusCode != http.StatusNoContent:
		_, _ = w.WriteString("Content-Length: " + strconv.FormatInt(resp.ContentLength, 10) + "\r\n")
	case !noBody:
		_, _ = w.WriteString("Transfer-Encoding: chunked\r\n")
	}
	if head.Close {
		_, _ = w.WriteString("Connection: close\r\n")
	}
	_, _ = w.WriteString("\r\n")
	resp.Header = nil // written; a body that waits for the client need not keep it
	if !noBody {
		body := flushing{resp.Body, br, w}
		if resp.ContentLength >= 0 {
			n, err = copyN(w, body, resp.ContentLength, roomOf(client))
		} else {
			n, err = copyChunked(w, body, roomOf(client))
		}
	}
	if err == nil {
		err = w.Flush()
	}
	return resp.StatusCode, n, err == nil
}

var buffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// copyN copies n bytes of r to w through a buffer of the pool (never
// into w's own buffer, which a flushing reader may flush meanwhile).
// Each read is no larger than room says the client takes (Room), and the
// buffer is held only for that read and its write: a client that takes
// nothing costs none.
func copyN(w *bufio.Writer, r io.Reader, n int64, room func() (int, error)) (int64, error) {
	var copied int64
	for copied < n {
		free, err := room()
		if err != nil {
			return copied, err
		}
		buf := buffers.Get().(*[]byte)
		m, err := r.Read((*buf)[:min(int64(free), int64(len(*buf)), n-copied)])
		if m > 0 {
			if _, werr := w.Write((*buf)[:m]); werr != nil {
				err = werr
			}
		}
		buffers.Put(buf)
		copied += int64(m)
		if err == io.EOF && copied < n {
			return copied, io.ErrUnexpectedEOF
		}
		if err != nil && err != io.EOF {
			return copied, err
		}
	}
	return copied, nil
}

// copyChunked copies r to w in chunks and ends the chunks, reading as
// copyN does.
func copyChunked(w *bufio.Writer, r io.Reader, room func() (int, error)) (int64, error) {
	var n int64
	for {
		free, err := room()
		if err != nil {
			return n, err
		}
		buf := buffers.Get().(*[]byte)
		m, err := r.Read((*buf)[:min(free, len(*buf))])
		if m > 0 {
			n += int64(m)
			if _, werr := w.Write(h1.AppendChunk(nil, (*buf)[:m])); werr != nil {
				err = werr
			}
		}
		buffers.Put(buf)
		if err == io.EOF {
			_, err = w.WriteString(h1.LastChunk)
			return n, err
		}
		if err != nil {
			return n, err
		}
	}
}

// roomOf is c's Room, or no bound for a connection without one.
func roomOf(c net.Conn) func() (int, error) {
	if r, ok := c.(interface{ Room() (int, error) }); ok {
		return r.Room
	}
	return func() (int, error) { return math.MaxInt, nil }
}

// flushing reads r, and sends what the client's buffer holds before a
// read that would wait for the pod: a streamed answer (server-sent
// events, long polls) reaches the client as the pod sends it, while a
// body already read from the pod costs no extra write.
type flushing struct {
	r   io.Reader
	pod *bufio.Reader
	w   *bufio.Writer
}

func (f flushing) Read(p []byte) (int, error) {
	if f.pod.Buffered() == 0 && f.w.Buffered() > 0 {
		if err := f.w.Flush(); err != nil {
			return 0, err
		}
	}
	return f.r.Read(p)
}
