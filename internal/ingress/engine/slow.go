package engine

import (
	"bufio"
	"bytes"
	"io"
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
	if !noBody {
		body := flushing{resp.Body, br, w}
		if resp.ContentLength >= 0 {
			n, err = copyN(w, body, resp.ContentLength)
		} else {
			n, err = copyChunked(w, body)
		}
	}
	if err == nil {
		err = w.Flush()
	}
	return resp.StatusCode, n, err == nil
}

var buffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// copyN copies n bytes of r to w, through a buffer of the pool: never
// by w's ReadFrom, which reads into w's own buffer and so must not see it
// flushed by a flushing reader meanwhile.
func copyN(w *bufio.Writer, r io.Reader, n int64) (int64, error) {
	buf := buffers.Get().(*[]byte)
	defer buffers.Put(buf)
	copied, err := io.CopyBuffer(writerOnly{w}, io.LimitReader(r, n), *buf)
	if err == nil && copied < n {
		err = io.ErrUnexpectedEOF
	}
	return copied, err
}

// copyChunked copies r to w in chunks and ends the chunks.
func copyChunked(w *bufio.Writer, r io.Reader) (int64, error) {
	buf := buffers.Get().(*[]byte)
	defer buffers.Put(buf)
	var n int64
	for {
		m, err := r.Read(*buf)
		if m > 0 {
			n += int64(m)
			if _, werr := w.Write(h1.AppendChunk(nil, (*buf)[:m])); werr != nil {
				return n, werr
			}
		}
		if err == io.EOF {
			_, err = w.WriteString(h1.LastChunk)
			return n, err
		}
		if err != nil {
			return n, err
		}
	}
}

// writerOnly hides its writer's ReadFrom from io.Copy.
type writerOnly struct{ io.Writer }

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
