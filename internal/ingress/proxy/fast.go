package proxy

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/textproto"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/svcnet/svcnet/internal/ingress/annotations"
	"github.com/svcnet/svcnet/internal/ingress/h1"
	"github.com/svcnet/svcnet/internal/ingress/route"
)

// The fast path serves the common request of plain HTTP/1.1 — no body,
// no upgrade, a route without annotations that change the exchange — on
// the connection's own goroutine: read the head into a buffer of the
// connection, match it, write it to a pod connection, copy the answer
// back, with no request or header map made. net/http's server and the
// reverse proxy cost twice the CPU per request of nginx (the request's
// clone, its header maps, the server's read-ahead goroutine); this path
// is what closes that gap. Every other request — and every malformed one,
// which net/http judges as before — is handed to net/http with its bytes
// unread, and the connection stays there.

// ConnTimeouts are a client connection's read timeouts on the fast path,
// net/http's ReadHeaderTimeout and IdleTimeout.
type ConnTimeouts struct {
	Header, Idle time.Duration
}

// fastConn is one client connection on the fast path.
type fastConn struct {
	p      *Proxy
	c      net.Conn
	br     *bufio.Reader
	bw     *bufio.Writer
	port   string
	ip     string // the client's address, for X-Forwarded-For
	req    h1.Request
	resp   h1.Response
	header []byte // the head written to a pod

	deadline time.Time      // the read deadline set last
	now      time.Time      // when the request's head was read
	obs      *routeObs      // the metrics of the route served last
	reqs     request        // the request being served
	ids      *mrand.ChaCha8 // X-Request-IDs, seeded from crypto/rand
	// The last request's host and path as strings: a client asks the
	// same ones again and again, and a string made per request is two
	// allocations, and with them the garbage collector's work.
	host, path string
}

// clientBuffer is the size of a client connection's read and write
// buffers; a request head that does not fit goes to net/http, whose limit
// (431 beyond) applies.
const clientBuffer = 4 << 10

// ServeConn serves the requests of a plain HTTP/1.1 connection for as
// long as they take the fast path. It returns nil when it closed c (the
// client closed it, asked to, timed out, or closing said so between
// requests), or c with the bytes it read but did not serve put back in
// front, for net/http's server to go on with.
func (p *Proxy) ServeConn(c net.Conn, port int, t ConnTimeouts, closing func() bool) net.Conn {
	fc := &fastConn{p: p, c: c, br: bufio.NewReaderSize(c, clientBuffer), bw: bufio.NewWriterSize(c, clientBuffer), port: strconv.Itoa(port)}
	fc.ip = c.RemoteAddr().String()
	if host, _, err := net.SplitHostPort(fc.ip); err == nil {
		fc.ip = host
	}
	return fc.run(t, closing, t.Header) // the first request's head is due as a whole
}

// run serves requests until the connection closes or goes to net/http;
// wait is how long the first may take to come.
func (fc *fastConn) run(t ConnTimeouts, closing func() bool, wait time.Duration) net.Conn {
	c := fc.c
	for {
		// A deadline is a timer's change in the runtime: it is moved
		// only when it would move by more than 1/64 of the timeout, so a
		// kept-alive connection times out between 74 and 75 s idle.
		if want := time.Now().Add(wait); want.Sub(fc.deadline) > wait/64 || fc.deadline.After(want) {
			_ = c.SetReadDeadline(want)
			fc.deadline = want
		}
		if closing() {
			c.Close()
			return nil
		}
		if _, err := fc.br.Peek(1); err != nil {
			c.Close()
			return nil
		}
		// The deadline stays as it is while the request is served: the
		// client is not read meanwhile, and the next wait sets its own.
		n, ok := fc.readHead(wait != t.Header, t.Header)
		if !ok {
			return fc.handoff()
		}
		if n < 0 {
			c.Close() // the head did not come in time, or the client left
			return nil
		}
		keep, served := fc.serve()
		if !served {
			return fc.handoff()
		}
		if _, err := fc.br.Discard(n); err != nil {
			keep = false
		}
		if err := fc.bw.Flush(); err != nil || !keep {
			c.Close()
			return nil
		}
		wait = t.Idle
	}
}

// readHead reads until the buffer holds a whole request head: n is its
// length, -1 when reading failed; ok false hands the connection over.
// With setDeadline, the header timeout starts when more than the bytes
// already read is needed (a head usually comes whole).
func (fc *fastConn) readHead(setDeadline bool, timeout time.Duration) (n int, ok bool) {
	for {
		buf, _ := fc.br.Peek(fc.br.Buffered())
		n, ok := h1.ParseRequest(buf, &fc.req)
		if !ok || n > 0 {
			return n, ok
		}
		if len(buf) == clientBuffer {
			return 0, false
		}
		if setDeadline {
			fc.deadline = time.Now().Add(timeout)
			_ = fc.c.SetReadDeadline(fc.deadline)
			setDeadline = false
		}
		if _, err := fc.br.Peek(len(buf) + 1); err != nil {
			return -1, true
		}
	}
}

// handoff is the connection with what was read and not served in front.
func (fc *fastConn) handoff() net.Conn {
	return &bufferedConn{Conn: fc.c, br: fc.br}
}

// bufferedConn reads what its buffer holds before the connection.
type bufferedConn struct {
	net.Conn
	br *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.br.Read(p) }

// NetConn is the connection underneath.
func (c *bufferedConn) NetConn() net.Conn { return c.Conn }

// fastConfig reports whether a route's annotations leave its requests to
// the fast path: none of them changes the exchange but the timeouts.
func fastConfig(rt *route.Route) bool {
	if rt.RedirectHTTPS || rt.Canary != nil {
		return false
	}
	a := rt.Config
	return a == nil || (a.RewriteTarget == "" && (a.BackendProtocol == "" || a.BackendProtocol == annotations.HTTP) &&
		len(a.SourceRanges) == 0 && a.Affinity == nil && a.Canary == nil)
}

// serve forwards the parsed request and writes the answer into fc.bw.
// served false: the request is for net/http and nothing was written;
// keep false: the connection closes after the answer.
func (fc *fastConn) serve() (keep, served bool) {
	req, ok := fc.route()
	if !ok {
		return false, false
	}
	fc.writeHead(req)
	status, bytes, keep := fc.exchange(req)
	fc.finish(req, fc.c.RemoteAddr().String(), status, bytes)
	return keep && !fc.req.Close, true
}

// route finds the parsed request's route and endpoints; ok false: the
// request is for net/http (no route, annotations that change the
// exchange, no endpoint, a path net/http would clean).
func (fc *fastConn) route() (*request, bool) {
	cfg := fc.p.cfg.Load()
	if cfg == nil {
		return nil, false
	}
	if string(fc.req.Path) != fc.path {
		fc.path = string(fc.req.Path)
	}
	if string(fc.req.Host) != fc.host {
		fc.host = string(fc.req.Host)
	}
	path := fc.path
	if clean, ok := route.CleanPath(path); !ok || clean != path {
		return nil, false
	}
	rt := cfg.table.Match(fc.host, path)
	if rt == nil || !fastConfig(rt) {
		return nil, false
	}
	up := cfg.ups[rt.Backend]
	eps := up.eps.Load().addrs
	if len(eps) == 0 {
		return nil, false
	}
	fc.now = time.Now()
	req := &fc.reqs // one at a time: reused, not allocated per request
	*req = request{route: rt, up: up, eps: eps, port: fc.port, cfg: rt.Config, path: path}
	if req.cfg == nil {
		req.cfg = &noConfig
	}
	req.start = up.pick(len(eps))
	return req, true
}

// finish counts and logs a request served.
func (fc *fastConn) finish(req *request, remote string, status int, bytes int64) {
	p := fc.p
	d := time.Since(fc.now)
	if fc.obs == nil || fc.obs.route != req.route || fc.obs.up != req.up {
		fc.obs = p.metrics.forRoute(req.route, req.up)
	}
	fc.obs.observe(status, d)
	if p.log != nil {
		p.log.write(logEntry{remote: remote, method: string(fc.req.Method), host: string(fc.req.Host), path: req.path}, req, status, bytes, d)
	}
}

// exchange sends the request to the route's pods, the next one when
// connecting fails, and copies the answer to the client. It returns what
// the client was answered and whether its connection can carry another
// request.
func (fc *fastConn) exchange(req *request) (status int, bytes int64, keep bool) {
	p := fc.p
	n := len(req.eps)
	var err error
	for i := 0; i < n; i++ {
		req.upstream = req.eps[(req.start+i)%n]
		var pc *podConn
		pc, err = fc.send(req)
		if err != nil {
			if dialFailed(err) {
				p.metrics.connectErrors.Inc()
				continue
			}
			if answeredNothing(err) && idempotent(string(fc.req.Method)) {
				continue
			}
			break
		}
		return fc.answer(req, pc)
	}
	return fc.fail(err), 0, true
}

// writeHead makes the head the pods receive: the client's, less its
// hop-by-hop fields, with Host passed through and the forwarded fields
// set as the reverse proxy's rewrite sets them.
func (fc *fastConn) writeHead(req *request) {
	r := &fc.req
	host := r.Host
	b := fc.header[:0]
	b = append(append(append(append(b, r.Method...), ' '), r.Target...), " HTTP/1.1\r\nHost: "...)
	b = append(append(b, r.Host...), "\r\n"...)
	for _, f := range r.Fields {
		b = append(append(append(append(b, f.Name...), ": "...), f.Value...), "\r\n"...)
	}
	b = append(append(b, "X-Forwarded-For: "...), fc.ip...)
	b = append(append(b, "\r\nX-Forwarded-Host: "...), host...)
	b = append(b, "\r\nX-Forwarded-Proto: http\r\nX-Forwarded-Port: "...)
	b = append(append(b, fc.port...), "\r\nX-Real-IP: "...)
	b = append(append(b, fc.ip...), "\r\n"...)
	if r.RequestID == nil {
		if fc.ids == nil {
			var seed [32]byte
			_, _ = rand.Read(seed[:])
			fc.ids = mrand.NewChaCha8(seed)
		}
		var raw [16]byte
		_, _ = fc.ids.Read(raw[:])
		var id [32]byte
		hex.Encode(id[:], raw[:])
		b = append(append(append(b, "X-Request-ID: "...), id[:]...), "\r\n"...)
		if fc.p.log != nil {
			req.id = string(id[:])
		}
	} else if fc.p.log != nil {
		req.id = string(r.RequestID)
	}
	fc.header = append(b, "\r\n"...)
}

// send writes the head to a connection to req.upstream and waits for the
// first byte of the answer. A kept-alive connection the pod had closed is
// replaced: the request has no body, so sending it again is safe.
func (fc *fastConn) send(req *request) (*podConn, error) {
	pods := fc.p.pods
	for {
		pc, reused, err := pods.get(context.Background(), req.upstream, req.cfg.ConnectTimeout)
		if err != nil {
			return nil, dialError{err}
		}
		if req.cfg.SendTimeout > 0 {
			_ = pc.SetWriteDeadline(time.Now().Add(req.cfg.SendTimeout))
		}
		_, err = pc.Write(fc.header)
		if req.cfg.SendTimeout > 0 {
			_ = pc.SetWriteDeadline(time.Time{}) // pooled for routes without one too
		}
		if err == nil {
			read := pods.readTimeout
			if req.cfg.ReadTimeout > 0 {
				read = req.cfg.ReadTimeout
			}
			// Moved only by more than 1/64 of the timeout, as the
			// client's: the answer's wait ends between 63/64 and all of
			// the timeout.
			if want := fc.now.Add(read); want.Sub(pc.readBy) > read/64 || pc.readBy.After(want) {
				_ = pc.SetReadDeadline(want)
				pc.readBy = want
			}
			// Other connections' requests first: the pod's answer is
			// then often there, and the read takes it without the
			// refused read, the park and the wake-up that waiting for it
			// costs.
			runtime.Gosched()
			_, err = pc.br.Peek(1)
		}
		if err == nil {
			return pc, nil
		}
		pc.Conn.Close()
		// A kept-alive connection the pod had closed: sent again, for
		// an idempotent method (the pod may have acted on another).
		if reused && !isTimeout(err) && idempotent(string(fc.req.Method)) {
			continue
		}
		return nil, err
	}
}

// answer copies the pod's answer to the client.
func (fc *fastConn) answer(req *request, pc *podConn) (status int, bytes int64, keep bool) {
	resp := &fc.resp
	var n int
	for {
		buf, _ := pc.br.Peek(pc.br.Buffered())
		var ok bool
		n, ok = h1.ParseResponse(buf, resp)
		if !ok {
			return fc.answerSlowly(req, pc)
		}
		if n == 0 {
			if len(buf) == pc.br.Size() {
				return fc.answerSlowly(req, pc)
			}
			if _, err := pc.br.Peek(len(buf) + 1); err != nil {
				pc.Conn.Close()
				return fc.fail(err), 0, true
			}
			continue
		}
		if resp.Status >= 200 {
			break
		}
		// 100 Continue and other informational answers are not passed on.
		_, _ = pc.br.Discard(n)
		if _, err := pc.br.Peek(1); err != nil {
			pc.Conn.Close()
			return fc.fail(err), 0, true
		}
	}
	if resp.ContentLength < 0 || int64(pc.br.Buffered()-n) < resp.ContentLength {
		_ = pc.SetReadDeadline(time.Time{}) // the body takes its time
		pc.readBy = time.Time{}
	}
	status = resp.Status
	w := fc.bw
	noBody := h1.NoBody(fc.req.Method, status)
	fc.header = fc.appendAnswerHead(fc.header[:0], noBody)
	_, _ = w.Write(fc.header)
	_, _ = pc.br.Discard(n)
	if noBody {
		fc.release(req, pc, !resp.Close)
		return status, 0, true
	}
	var err error
	switch {
	case resp.ContentLength >= 0:
		bytes, err = copyN(w, flushing{pc.br, pc.br, w}, resp.ContentLength)
	case resp.Chunked:
		if bytes, err = copyChunked(w, flushing{httputil.NewChunkedReader(pc.br), pc.br, w}); err == nil {
			err = skipTrailer(pc.br)
		}
	default: // until the pod closes
		bytes, err = copyChunked(w, flushing{pc.br, pc.br, w})
		resp.Close = true
	}
	if err != nil {
		// Half an answer was sent: only closing tells the client.
		pc.Conn.Close()
		return status, bytes, false
	}
	fc.release(req, pc, !resp.Close)
	return status, bytes, true
}

// appendAnswerHead appends the head of the answer in fc.resp, as the
// client gets it, to b.
func (fc *fastConn) appendAnswerHead(b []byte, noBody bool) []byte {
	resp := &fc.resp
	b = strconv.AppendInt(append(b, "HTTP/1.1 "...), int64(resp.Status), 10)
	b = append(append(append(b, ' '), resp.Reason...), "\r\n"...)
	for _, f := range resp.Fields {
		b = append(append(append(append(b, f.Name...), ": "...), f.Value...), "\r\n"...)
	}
	switch {
	case resp.ContentLength >= 0 && resp.Status != 204: // a HEAD's and a 304's too
		b = strconv.AppendInt(append(b, "Content-Length: "...), resp.ContentLength, 10)
		b = append(b, "\r\n"...)
	case !noBody && resp.ContentLength < 0:
		b = append(b, "Transfer-Encoding: chunked\r\n"...)
	}
	if fc.req.Close {
		b = append(b, "Connection: close\r\n"...)
	}
	return append(b, "\r\n"...)
}

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

// maxTrailer bounds the trailer lines skipped after a chunked body.
const maxTrailer = 64

// skipTrailer reads the trailer section after a chunked body's last
// chunk, up to its empty line: the trailer is not passed on (as the
// reverse proxy's is not for a response it re-chunks without one
// announced).
func skipTrailer(br *bufio.Reader) error {
	for range maxTrailer {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		if len(line) <= 2 && (string(line) == "\r\n" || string(line) == "\n") {
			return nil
		}
	}
	return errors.New("trailer too long")
}

// copyChunked copies r to w in chunks and ends the chunks.
func copyChunked(w *bufio.Writer, r io.Reader) (int64, error) {
	cw := httputil.NewChunkedWriter(w)
	buf := buffers.Get().(*[]byte)
	defer buffers.Put(buf)
	n, err := io.CopyBuffer(writerOnly{cw}, r, *buf)
	if err != nil {
		return n, err
	}
	if err := cw.Close(); err != nil {
		return n, err
	}
	_, err = w.WriteString("\r\n") // no trailer
	return n, err
}

// release keeps a pod connection whose answer was read to its end.
func (fc *fastConn) release(req *request, pc *podConn, keep bool) {
	if keep {
		fc.p.pods.put(req.upstream, pc)
		return
	}
	pc.Conn.Close()
}

// answerSlowly passes on an answer whose head the fast reader declines
// (larger than its buffer, or unusual): net/http reads it.
func (fc *fastConn) answerSlowly(req *request, pc *podConn) (status int, bytes int64, keep bool) {
	defer pc.Conn.Close()
	var resp *http.Response
	var err error
	for {
		resp, err = http.ReadResponse(pc.br, &http.Request{Method: string(fc.req.Method)})
		if err != nil {
			return fc.fail(err), 0, true
		}
		if resp.StatusCode >= 200 {
			break
		}
		resp.Body.Close()
	}
	defer resp.Body.Close()
	_ = pc.SetReadDeadline(time.Time{})
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
	w := fc.bw
	// The standard reason: the pod's may hold what the fast reader
	// declined.
	_, _ = w.WriteString("HTTP/1.1 " + strconv.Itoa(resp.StatusCode) + " " + http.StatusText(resp.StatusCode) + "\r\n")
	_ = resp.Header.Write(w)
	noBody := h1.NoBody(fc.req.Method, resp.StatusCode)
	switch {
	case resp.ContentLength >= 0 && resp.StatusCode != 204:
		_, _ = w.WriteString("Content-Length: " + strconv.FormatInt(resp.ContentLength, 10) + "\r\n")
	case !noBody:
		_, _ = w.WriteString("Transfer-Encoding: chunked\r\n")
	}
	if fc.req.Close {
		_, _ = w.WriteString("Connection: close\r\n")
	}
	_, _ = w.WriteString("\r\n")
	if noBody {
		return resp.StatusCode, 0, true
	}
	if resp.ContentLength >= 0 {
		bytes, err = copyN(w, flushing{resp.Body, pc.br, w}, resp.ContentLength)
	} else {
		bytes, err = copyChunked(w, flushing{resp.Body, pc.br, w})
	}
	return resp.StatusCode, bytes, err == nil
}

// fail answers a request no pod answered: 504 for a timeout, 502 for
// anything else, as the reverse proxy's error handler does.
func (fc *fastConn) fail(err error) int {
	var status int
	fc.header, status = fc.appendFailure(fc.header[:0], err)
	_, _ = fc.bw.Write(fc.header)
	return status
}

// appendFailure appends fail's answer to err to b.
func (fc *fastConn) appendFailure(b []byte, err error) ([]byte, int) {
	status, text := gatewayError(err)
	text += "\n" // as http.Error ends it
	b = append(b, "HTTP/1.1 "+strconv.Itoa(status)+" "+http.StatusText(status)+
		"\r\nContent-Type: text/plain; charset=utf-8\r\nX-Content-Type-Options: nosniff\r\nContent-Length: "+strconv.Itoa(len(text))+"\r\n"...)
	if fc.req.Close {
		b = append(b, "Connection: close\r\n"...)
	}
	b = append(b, "\r\n"...)
	if string(fc.req.Method) != "HEAD" {
		b = append(b, text...)
	}
	return b, status
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) ||
		(errors.As(err, &ne) && ne.Timeout()) || errors.Is(err, syscall.ETIMEDOUT)
}

// gatewayError is the answer to a request no pod answered, on either
// path: 504 for a timeout, 502 for anything else (a refused or reset
// connection, a pod that answered nothing or garbage).
func gatewayError(err error) (int, string) {
	if isTimeout(err) {
		return http.StatusGatewayTimeout, "504 gateway timeout"
	}
	return http.StatusBadGateway, "502 bad gateway"
}
