package runtime

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// Attaching to a running container (kubectl attach, kubectl run -i) goes
// through its shim, which holds the container's stdin and sees its output:
// the shim listens on a unix socket in the start's state directory (0700,
// the node agent's alone), and each connection speaks frames
//
//	kind byte, length uint32 (big endian), payload
//
// The client sends a hello first (JSON attachHello), then stdin data,
// stdin's end and terminal sizes. The shim answers a client it takes
// with frameAttached, then the container's output from that moment on,
// and once the container has exited and that output is all sent,
// frameExited. A client that comes after the exit gets frameExited
// alone: it missed the output, which is in the log. The first client of
// a container whose stdin is for one attach (stdinOnce: what kubectl
// run -i makes) gets the output written before it first (firstAttach).
// A client that falls
// more than attachBacklog behind the output is let go with frameBehind
// (its text says why) after what was queued for it. So an attach ends
// well only on frameExited after frameAttached; a connection that ends
// without it lost output. (Shims that predate frameAttached send output
// at once and end with the connection.)
const (
	attachSock = "attach.sock"

	frameHello  = 'h'
	frameStdin  = 'i'
	frameEOF    = 'c' // the client's stdin ended
	frameResize = 'r' // width, height: uint16 each
	frameStdout = 'o'
	frameStderr = 'e'

	frameAttached = 'a'
	frameExited   = 'x'
	frameBehind   = 'b'

	maxFrame = 1 << 20
)

// Stdio is how a container's standard streams are set up (its spec's
// stdin, stdinOnce and tty).
type Stdio struct {
	Stdin     bool `json:"stdin,omitempty"`
	StdinOnce bool `json:"stdinOnce,omitempty"`
	TTY       bool `json:"tty,omitempty"`
}

type attachHello struct {
	Stdin, Stdout, Stderr bool
}

func writeFrame(w io.Writer, kind byte, payload []byte) error {
	_, err := w.Write(appendFrame(nil, kind, payload))
	return err
}

func appendFrame(b []byte, kind byte, payload []byte) []byte {
	b = append(b, kind)
	b = binary.BigEndian.AppendUint32(b, uint32(len(payload)))
	return append(b, payload...)
}

func readFrame(r io.Reader) (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > maxFrame {
		return 0, nil, fmt.Errorf("attach frame of %d bytes", n)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		return 0, nil, err
	}
	return hdr[0], buf, nil
}

// attachHub is the shim's side: it hands the container's output to the
// attached clients and their input to the container.
type attachHub struct {
	stdio Stdio
	in    io.WriteCloser // the container's stdin (nil without stdin)
	tty   *os.File       // the terminal's master, for sizes (nil without tty)

	mu      sync.Mutex
	clients map[*attachClient]bool
	closed  bool // stdin closed for good (stdinOnce)
	ended   bool // the container has exited: closeAll ran
	// early is the output written before the first client came, for
	// it, while recording (stdinOnce, no client yet, within
	// firstAttach).
	early     outQueue
	recording bool
	// writers counts the clients' writers until they have written what
	// was queued for them and frameExited: the shim must not exit
	// before (its exit closes the connections).
	writers sync.WaitGroup
}

var (
	// attachDrain bounds how long a shim whose container has exited
	// waits for its clients to take the output queued for them.
	attachDrain = 10 * time.Second
	// firstAttach bounds the output kept for a stdinOnce container's
	// first client (bytes): more, and that client gets only what comes
	// after it, as every other.
	firstAttach = 1 << 20
	// attachBacklog bounds the output queued for a client (bytes): one
	// that falls further behind is let go rather than holding the
	// container's output (and its log) back. The count is of bytes, as
	// a container's small writes (a line each) come quicker than they
	// go through the node agent and the API server to kubectl.
	attachBacklog = 4 << 20
)

// mergeLimit is the largest frame that queued output is merged into:
// a client behind gets its backlog in a few writes, not one a line.
const mergeLimit = 32 << 10

// outQueue is output in order, consecutive output of a stream merged
// into frames of up to mergeLimit.
type outQueue struct {
	frames []frame
	size   int // bytes
}

func (q *outQueue) add(kind byte, p []byte) {
	q.size += len(p)
	for len(p) > 0 {
		if n := len(q.frames); n > 0 && q.frames[n-1].kind == kind && len(q.frames[n-1].data) < mergeLimit {
			last := &q.frames[n-1]
			k := min(len(p), mergeLimit-len(last.data))
			last.data = append(last.data, p[:k]...)
			p = p[k:]
			continue
		}
		k := min(len(p), mergeLimit)
		q.frames = append(q.frames, frame{kind, append(make([]byte, 0, k), p[:k]...)})
		p = p[k:]
	}
}

type attachClient struct {
	hello attachHello
	conn  net.Conn
	wake  chan struct{} // a token when pending or end changed

	// Under the hub's mu:
	pending outQueue // output not yet written
	// end is how the client's output ends once pending is written:
	// frameExited, frameBehind, or endGone (the client went); 0 while it
	// goes on. No output is queued after it is set.
	end byte
}

// endGone ends the output of a client that went: nothing more is sent.
const endGone = 0xff

func (c *attachClient) notify() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// wants reports whether the client takes output of kind.
func (c *attachClient) wants(kind byte) bool {
	return (kind != frameStdout || c.hello.Stdout) && (kind != frameStderr || c.hello.Stderr)
}

// queue adds output for the client (under the hub's mu).
func (c *attachClient) queue(kind byte, p []byte) {
	c.pending.add(kind, p)
	c.notify()
}

// stop ends the client's output with end (under the hub's mu).
func (c *attachClient) stop(end byte) {
	c.end = end
	c.notify()
}

type frame struct {
	kind byte
	data []byte
}

func newAttachHub(stdio Stdio, in io.WriteCloser, tty *os.File) *attachHub {
	return &attachHub{stdio: stdio, in: in, tty: tty, clients: map[*attachClient]bool{},
		recording: stdio.Stdin && stdio.StdinOnce}
}

// serve accepts attach connections until l is closed.
func (h *attachHub) serve(l net.Listener) {
	for {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		go h.handle(conn)
	}
}

func (h *attachHub) handle(conn net.Conn) {
	defer conn.Close()
	kind, data, err := readFrame(conn)
	if err != nil || kind != frameHello {
		return
	}
	c := &attachClient{conn: conn, wake: make(chan struct{}, 1)}
	if json.Unmarshal(data, &c.hello) != nil {
		return
	}
	h.mu.Lock()
	if h.ended {
		// The container has exited: what it wrote is in the log only.
		h.mu.Unlock()
		_ = writeFrame(conn, frameExited, nil)
		return
	}
	if h.recording {
		// kubectl run -i attaches once the pod runs: what the container
		// wrote before belongs to that session too.
		for _, f := range h.early.frames {
			if c.wants(f.kind) {
				c.queue(f.kind, f.data)
			}
		}
		h.early, h.recording = outQueue{}, false
	}
	h.clients[c] = true
	h.writers.Add(1)
	h.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer h.writers.Done()
		defer close(done)
		// Let go, gone, or the container ended: the client's reads end
		// too.
		defer conn.Close()
		h.write(c)
	}()
	h.input(c)
	h.drop(c)
	<-done
}

// write sends a client frameAttached, then its output as it is queued,
// and how it ends.
func (h *attachHub) write(c *attachClient) {
	if writeFrame(c.conn, frameAttached, nil) != nil {
		return
	}
	var buf []byte
	for range c.wake {
		h.mu.Lock()
		pending, end := c.pending.frames, c.end
		c.pending = outQueue{}
		h.mu.Unlock()
		buf = buf[:0]
		for _, f := range pending {
			buf = appendFrame(buf, f.kind, f.data)
		}
		switch end {
		case frameExited:
			buf = appendFrame(buf, frameExited, nil)
		case frameBehind:
			buf = appendFrame(buf, frameBehind, fmt.Appendf(nil, "the attached client fell more than %d bytes behind the container's output", attachBacklog))
		}
		if len(buf) > 0 {
			if _, err := c.conn.Write(buf); err != nil {
				return
			}
		}
		if end != 0 {
			return
		}
	}
}

// input copies a client's frames to the container until it goes.
func (h *attachHub) input(c *attachClient) {
	sawStdin := false
	for {
		kind, data, err := readFrame(c.conn)
		if err != nil {
			if sawStdin {
				h.stdinEnded()
			}
			return
		}
		switch kind {
		case frameStdin:
			sawStdin = true
			if h.in != nil && c.hello.Stdin && !h.isClosed() {
				_, _ = h.in.Write(data)
			}
		case frameEOF:
			if c.hello.Stdin {
				h.stdinEnded()
				sawStdin = false
			}
		case frameResize:
			if h.tty != nil && len(data) == 4 {
				w, ht := binary.BigEndian.Uint16(data), binary.BigEndian.Uint16(data[2:])
				_ = pty.Setsize(h.tty, &pty.Winsize{Cols: w, Rows: ht})
			}
		}
	}
}

func (h *attachHub) isClosed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed
}

// stdinEnded: an attached client's input ended. With stdinOnce the
// container's stdin ends too (end of file; on a terminal, its EOF
// character), as kubelet closes it after the first attach.
func (h *attachHub) stdinEnded() {
	if !h.stdio.StdinOnce || h.in == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.closed = true
	if h.tty != nil {
		_, _ = h.in.Write([]byte{4})
		return
	}
	_ = h.in.Close()
}

// drop forgets a client that went.
func (h *attachHub) drop(c *attachClient) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.clients[c] {
		delete(h.clients, c)
		c.stop(endGone)
	}
}

// output is a writer of one of the container's streams to the clients
// that want it. It never waits for them: a client more than
// attachBacklog behind is let go.
func (h *attachHub) output(kind byte) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.recording {
			if h.early.size+len(p) <= firstAttach {
				h.early.add(kind, p)
			} else {
				h.early, h.recording = outQueue{}, false
			}
		}
		for c := range h.clients {
			if !c.wants(kind) {
				continue
			}
			if c.pending.size+len(p) > attachBacklog {
				delete(h.clients, c)
				c.stop(frameBehind)
				continue
			}
			c.queue(kind, p)
		}
		return len(p), nil
	})
}

// closeAll ends every connection (the container has exited) once what
// was queued for them and frameExited are written, and returns then (or
// after attachDrain, for a client that does not read): the shim exits
// next. It is called once the container's output has ended.
func (h *attachHub) closeAll() {
	h.mu.Lock()
	h.ended = true
	for c := range h.clients {
		delete(h.clients, c)
		c.stop(frameExited)
	}
	h.mu.Unlock()
	written := make(chan struct{})
	go func() { h.writers.Wait(); close(written) }()
	select {
	case <-written:
	case <-time.After(attachDrain):
	}
}

// unixPath names socket name in dir by a path short enough for a unix
// socket address (108 bytes; state directories can be longer), through
// an open descriptor of dir, which the caller closes once bound or
// connected.
func unixPath(dir, name string) (string, func(), error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", nil, err
	}
	return fmt.Sprintf("/proc/self/fd/%d/%s", fd, name), func() { unix.Close(fd) }, nil
}

// listenAttach listens on the attach socket of stateDir.
func listenAttach(stateDir string) (net.Listener, error) {
	_ = os.Remove(filepath.Join(stateDir, attachSock))
	path, done, err := unixPath(stateDir, attachSock)
	if err != nil {
		return nil, err
	}
	defer done()
	return net.Listen("unix", path)
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// AttachStreams are a client's ends of an attach.
type AttachStreams struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Resize delivers terminal sizes (width, height) while attached.
	Resize <-chan [2]uint16
}

var (
	// ErrNotAttachable: the start has no shim listening (it ended, or
	// was started before attaching existed).
	ErrNotAttachable = errors.New("the container cannot be attached to")
	// ErrExited: the container exited before the client was attached;
	// its output is in its log.
	ErrExited = errors.New("the container has exited")
)

// Attach connects to the container started from stateDir and copies the
// streams until the container exits, and returns nil once all its output
// since the attach is written. An attach that comes after the container
// exited fails with ErrExited; one whose connection ends before the
// container's exit (output lost) fails too.
func Attach(stateDir string, s AttachStreams) error {
	path, done, err := unixPath(stateDir, attachSock)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNotAttachable, err)
	}
	conn, err := net.Dial("unix", path)
	done()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNotAttachable, err)
	}
	defer conn.Close()
	hello, _ := json.Marshal(attachHello{Stdin: s.Stdin != nil, Stdout: s.Stdout != nil, Stderr: s.Stderr != nil})
	var wmu sync.Mutex
	send := func(kind byte, data []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		return writeFrame(conn, kind, data)
	}
	if err := send(frameHello, hello); err != nil {
		return err
	}
	if s.Stdin != nil {
		go func() {
			buf := make([]byte, 32*1024)
			for {
				n, err := s.Stdin.Read(buf)
				if n > 0 && send(frameStdin, buf[:n]) != nil {
					return
				}
				if err != nil {
					_ = send(frameEOF, nil)
					return
				}
			}
		}()
	}
	if s.Resize != nil {
		go func() {
			for size := range s.Resize {
				var b [4]byte
				binary.BigEndian.PutUint16(b[:], size[0])
				binary.BigEndian.PutUint16(b[2:], size[1])
				if send(frameResize, b[:]) != nil {
					return
				}
			}
		}()
	}
	attached := false // the shim took this client: frameAttached came
	for {
		kind, data, err := readFrame(conn)
		if err != nil {
			switch {
			case attached:
				return fmt.Errorf("attach ended before the container's exit, output may be lost: %w", err)
			case errors.Is(err, io.EOF):
				return nil // a shim that predates frameAttached
			}
			return err
		}
		var w io.Writer
		switch kind {
		case frameAttached:
			attached = true
		case frameExited:
			if !attached {
				return ErrExited
			}
			return nil
		case frameBehind:
			return errors.New(string(data))
		case frameStdout:
			w = s.Stdout
		case frameStderr:
			w = s.Stderr
		}
		if w != nil {
			if _, err := w.Write(data); err != nil {
				return err
			}
		}
	}
}
