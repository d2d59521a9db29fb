package server

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/freeport"
	"github.com/svcnet/svcnet/internal/ingress/proxy"
	"github.com/svcnet/svcnet/internal/ingress/route"
	"github.com/svcnet/svcnet/internal/ingress/upstream"
)

// ingressUnderTest is the ingress's client listeners as Run serves them,
// through Serve with the proxy: the plain one (the engine first, net/http
// for what it declines) and a TLS one, sharing a connection limit, in
// front of one pod.
type ingressUnderTest struct {
	px           *proxy.Proxy
	reg          *prometheus.Registry
	limit        *Limit
	plain, https string
	pod          *bigPod
}

func serveIngress(t *testing.T, sendTimeout time.Duration, body int) *ingressUnderTest {
	t.Helper()
	pod := newBigPod(t, body)
	in := serveIngressTo(t, sendTimeout, pod.addr)
	in.pod = pod
	return in
}

// serveIngressTo is the ingress in front of the pod at addr.
func serveIngressTo(t testing.TB, sendTimeout time.Duration, addr string) *ingressUnderTest {
	t.Helper()
	in := &ingressUnderTest{reg: prometheus.NewRegistry(), limit: NewLimit(10000)}
	in.px = proxy.New(proxy.Options{SendTimeout: sendTimeout, Registerer: in.reg})
	t.Cleanup(in.px.Close)
	cert, err := proxy.SelfSigned()
	if err != nil {
		t.Fatal(err)
	}
	in.px.SetCerts(proxy.NewCerts(cert))
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "big"},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: "app.example",
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
				Path: "/big", PathType: ptr.To(networkingv1.PathTypePrefix),
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "big", Port: networkingv1.ServiceBackendPort{Number: 80}}},
			}}}}}}}}
	table, problems := route.Build([]*networkingv1.Ingress{ing})
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	up := upstream.New(table.Backends[0])
	up.Set([]string{addr})
	in.px.Set(table, []*upstream.Upstream{up})

	srv := New()
	t.Cleanup(srv.Shutdown)
	listen := func() *Listener {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return &Listener{Listener: l, Limit: in.limit}
	}
	plain, https := listen(), listen()
	srv.Serve(plain, in.px.Handler(plain.Port()), nil, false, in.px)
	srv.Serve(https, in.px.Handler(https.Port()), in.px.TLSConfig(), false, in.px)
	in.plain, in.https = plain.Addr().String(), https.Addr().String()
	return in
}

// timeouts is the value of svcnet_ingress_send_timeouts_total.
func (in *ingressUnderTest) timeouts(t *testing.T) int {
	t.Helper()
	families, err := in.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "svcnet_ingress_send_timeouts_total" {
			return int(f.GetMetric()[0].GetCounter().GetValue())
		}
	}
	t.Fatal("no svcnet_ingress_send_timeouts_total")
	return 0
}

// awaitOneTimeout waits, ten send timeouts at the most, for the stalled
// client's connection to be closed and counted, and fails unless it is
// the one send timeout counted. It returns how long the wait took.
func (in *ingressUnderTest) awaitOneTimeout(t *testing.T, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for in.limit.open.Load() > 0 || in.timeouts(t) == 0 {
		if time.Since(start) > 10*timeout {
			t.Fatalf("after %v: %d connections open, %d send timeouts; want the stalled client closed and counted",
				time.Since(start), in.limit.open.Load(), in.timeouts(t))
		}
		time.Sleep(20 * time.Millisecond)
	}
	waited := time.Since(start)
	if n := in.timeouts(t); n != 1 {
		t.Fatalf("%d send timeouts, want 1", n)
	}
	return waited
}

// bigPod answers every request with a body of its size, the reason
// phrase "Pod OK" (which only the engine's loops pass on as it is), and a
// head larger than the engine's pod buffer for paths ending in /odd
// (which sends the answer to the engine's goroutine path). It closes a
// connection once its answer is written: the rest waits in the sockets'
// buffers, so the pod keeps nothing in memory for the clients the
// ingress holds.
type bigPod struct {
	addr     string
	answered atomic.Int32
}

func newBigPod(t *testing.T, size int) *bigPod {
	t.Helper()
	p := &bigPod{}
	body := make([]byte, size)
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	p.addr = freeport.Serve(t, func(c net.Conn) {
		_ = c.(*net.TCPConn).SetWriteBuffer(size + 64<<10)
		req, err := http.ReadRequest(bufio.NewReaderSize(c, 512))
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		extra := ""
		if strings.HasSuffix(req.URL.Path, "/odd") {
			extra = "X-Big: " + strings.Repeat("b", 20<<10) + "\r\n"
		}
		fmt.Fprintf(c, "HTTP/1.1 200 Pod OK\r\nContent-Length: %d\r\n%s\r\n", size, extra)
		if _, err := c.Write(body); err == nil {
			p.answered.Add(1)
		}
	})
	return p
}

// dialClient connects to addr with a receive buffer of rcvbuf bytes and
// a segment size of 1,400 bytes: over loopback's 64 KiB segments the
// kernel would take megabytes of an answer for each client before the
// ingress's writes wait.
func dialClient(t *testing.T, addr string, rcvbuf int) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var err error
		_ = rc.Control(func(fd uintptr) {
			if err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvbuf); err == nil {
				err = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_MAXSEG, 1400)
			}
		})
		return err
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// paths are the ways a client's answer is written, and how a client
// tells which one wrote its head.
type path struct {
	name    string
	tls     bool
	request string
	by      func(*http.Response) bool
}

var paths = []path{
	{"engine", false, "GET /big HTTP/1.1\r\nHost: app.example\r\n\r\n",
		func(r *http.Response) bool { return r.Status == "200 Pod OK" }},
	{"engine, answer on a goroutine", false, "GET /big/odd HTTP/1.1\r\nHost: app.example\r\n\r\n",
		func(r *http.Response) bool { return r.Status == "200 OK" && r.Header.Get("Date") == "" }},
	{"fallback", false, "POST /big HTTP/1.1\r\nHost: app.example\r\nContent-Length: 1\r\n\r\nx",
		func(r *http.Response) bool { return r.Status == "200 OK" && r.Header.Get("Date") != "" }},
	{"fallback, TLS", true, "GET /big HTTP/1.1\r\nHost: app.example\r\n\r\n",
		func(r *http.Response) bool { return r.Status == "200 OK" && r.Header.Get("Date") != "" }},
}

// TestSendTimeout: on every path, a client that stops reading its answer
// is closed once it has taken nothing for the send timeout, its
// connection's slot freed and the timeout counted; a client that reads
// slowly but steadily, for several timeouts, gets its whole answer.
func TestSendTimeout(t *testing.T) {
	const timeout = time.Second
	for _, p := range paths {
		t.Run(p.name+", stalled", func(t *testing.T) {
			t.Parallel()
			const size = 1 << 20
			in := serveIngress(t, timeout, size)
			c, br, resp := request(t, in, p.tls, p.request, 4<<10)
			if !p.by(resp) {
				t.Fatalf("answered %q, %v: not by the path under test", resp.Status, resp.Header)
			}
			// Reads nothing more.
			t.Logf("closed after %v", in.awaitOneTimeout(t, timeout).Round(time.Millisecond))
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			n, err := io.Copy(io.Discard, br)
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("the client's connection is still open")
			}
			if n >= size {
				t.Fatalf("the client got the whole body (%d bytes) after its connection was closed", n)
			}
		})
		t.Run(p.name+", steady", func(t *testing.T) {
			t.Parallel()
			// Read 16 KiB every 50 ms: what the kernel takes in before
			// the ingress waits (a few hundred KiB here) goes at once,
			// the rest at that pace, over at least two timeouts.
			const size, every = 1 << 20, 50 * time.Millisecond
			in := serveIngress(t, timeout, size)
			c, _, resp := request(t, in, p.tls, p.request, 8<<10)
			if !p.by(resp) {
				t.Fatalf("answered %q, %v: not by the path under test", resp.Status, resp.Header)
			}
			_ = c.SetReadDeadline(time.Now().Add(time.Minute))
			start := time.Now()
			var got int64
			buf := make([]byte, 16<<10)
			for {
				n, err := io.ReadFull(resp.Body, buf)
				got += int64(n)
				if err == io.EOF || err == io.ErrUnexpectedEOF {
					break
				}
				if err != nil {
					t.Fatalf("after %d bytes in %v: %v", got, time.Since(start), err)
				}
				time.Sleep(every)
			}
			took := time.Since(start)
			if got != size {
				t.Fatalf("got %d bytes of %d in %v", got, size, took)
			}
			if took < 2*timeout {
				t.Fatalf("read in %v: too fast to show anything about a timeout of %v", took, timeout)
			}
			if n := in.timeouts(t); n != 0 {
				t.Fatalf("%d send timeouts, want none", n)
			}
		})
	}
}

// TestSendTimeoutHTTP2: an HTTP/2 client over TLS that grants the
// ingress all the window it may and then stops reading its connection is
// closed after the send timeout, as an HTTP/1.1 one.
func TestSendTimeoutHTTP2(t *testing.T) {
	const timeout = time.Second
	in := serveIngress(t, timeout, 1<<20)
	raw := dialClient(t, in.https, 4<<10)
	t.Cleanup(func() { raw.Close() })
	c := tls.Client(raw, &tls.Config{ServerName: "app.example", InsecureSkipVerify: true, NextProtos: []string{"h2"}})
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if err := c.Handshake(); err != nil {
		t.Fatal(err)
	}
	if p := c.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("ALPN chose %q", p)
	}
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	const window = 1<<31 - 1
	var head bytes.Buffer
	enc := hpack.NewEncoder(&head)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", "app.example"}, {":path", "/big"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	for _, err := range []error{
		fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: window}),
		fr.WriteWindowUpdate(0, window-65535),
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: head.Bytes(), EndStream: true, EndHeaders: true}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	// Frames up to the answer's head, then nothing more is read.
	dec := hpack.NewDecoder(4096, nil)
	for status := ""; status == ""; {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck()
			}
		case *http2.HeadersFrame:
			fields, err := dec.DecodeFull(f.HeaderBlockFragment())
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range fields {
				if h.Name == ":status" {
					status = h.Value
				}
			}
			if status != "200" {
				t.Fatalf("status %q", status)
			}
		}
	}
	in.awaitOneTimeout(t, timeout)
}

// request sends req on a new connection (over TLS with useTLS) and reads
// the answer's head.
func request(t *testing.T, in *ingressUnderTest, useTLS bool, req string, rcvbuf int) (net.Conn, *bufio.Reader, *http.Response) {
	t.Helper()
	addr := in.plain
	if useTLS {
		addr = in.https
	}
	c := dialClient(t, addr, rcvbuf)
	t.Cleanup(func() { c.Close() })
	if useTLS {
		tc := tls.Client(c, &tls.Config{ServerName: "app.example", InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
		t.Cleanup(func() { tc.Close() })
		c = tc
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReaderSize(c, 1<<10)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Time{})
	return c, br, resp
}

// TestSendTimeoutMemory: 1,000 clients that stop reading their answers
// hold the ingress to less than 50 MiB more than before they came (the
// heap and goroutine stacks of this process, where the pods keep nothing
// for them and the clients little), on every path. Once the send timeout
// has closed them all, the ingress is back where it was. -held.profiles
// tells where the memory goes. With the race detector only the event
// loops are measured (the goroutines' paths are not what they are
// without it).
func TestSendTimeoutMemory(t *testing.T) {
	const (
		clients = 1000
		timeout = 3 * time.Second
		size    = 256 << 10
		limit   = 50 << 20
	)
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			if raceDetector && p.name != "engine" {
				// Its instrumentation grows the goroutines' stacks past
				// what the runtime shrinks.
				t.Skip("measured without the race detector")
			}
			in := serveIngress(t, timeout, size)
			heap0, stacks0 := heapAndStacks()
			before := heap0 + stacks0
			conns := make([]net.Conn, 0, clients)
			defer func() {
				for _, c := range conns {
					c.Close()
				}
			}()
			writers := make([]net.Conn, 0, clients)
			for range clients {
				raw, c := connect(t, in, p)
				conns, writers = append(conns, raw), append(writers, c)
			}
			for _, c := range writers {
				if _, err := io.WriteString(c, p.request); err != nil {
					t.Fatal(err)
				}
			}
			writers = nil
			for deadline := time.Now().Add(timeout); in.pod.answered.Load() < clients; {
				if time.Now().After(deadline) {
					t.Fatalf("the pod answered %d of %d requests", in.pod.answered.Load(), clients)
				}
				time.Sleep(10 * time.Millisecond)
			}
			time.Sleep(100 * time.Millisecond) // the ingress passes on what it can, then waits
			heap1, stacks1 := heapAndStacks()
			held := heap1 + stacks1
			if *heldProfiles != "" {
				writeProfiles(t, *heldProfiles+"."+strings.NewReplacer(" ", "", ",", "-").Replace(p.name))
			}
			if n := in.limit.open.Load(); n != clients || in.timeouts(t) != 0 {
				t.Fatalf("%d connections open, %d send timeouts while measuring; want all %d open", n, in.timeouts(t), clients)
			}
			extra := held - before
			t.Logf("%d stalled clients: %.1f MiB more (%.1f KiB each: heap %.1f, stacks %.1f)", clients, mib(extra),
				float64(extra)/clients/1024, float64(heap1-heap0)/clients/1024, float64(stacks1-stacks0)/clients/1024)
			if extra >= limit {
				t.Errorf("%d stalled clients hold %.1f MiB, want less than %.0f", clients, mib(extra), mib(limit))
			}
			for deadline := time.Now().Add(10 * timeout); in.limit.open.Load() > 0 || in.timeouts(t) < clients; {
				if time.Now().After(deadline) {
					t.Fatalf("%d connections open, %d send timeouts; want all %d closed and counted", in.limit.open.Load(), in.timeouts(t), clients)
				}
				time.Sleep(20 * time.Millisecond)
			}
			for _, c := range conns {
				c.Close()
			}
			conns = nil
			after := inUse()
			t.Logf("after the send timeout: %.1f MiB more than before", mib(after-before))
			if after-before > extra/10 {
				t.Errorf("after the send timeout closed them, %.1f MiB more than before, want it back", mib(after-before))
			}
		})
	}
}

// connect opens a client connection on p's listener, over TLS with its
// handshake done, for a request that comes later: the clients' send
// timeouts start with their requests, not with the handshakes, which
// take longer. raw is the connection underneath, c the one to write
// to. The client reads nothing more: its own TLS state is let go once
// it has written (only raw is kept), so what is measured is the
// ingress's.
func connect(t *testing.T, in *ingressUnderTest, p path) (raw, c net.Conn) {
	t.Helper()
	if !p.tls {
		c := dialClient(t, in.plain, 4<<10)
		return c, c
	}
	raw = dialClient(t, in.https, 4<<10)
	tc := tls.Client(raw, &tls.Config{ServerName: "app.example", InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
	_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
	if err := tc.Handshake(); err != nil {
		raw.Close()
		t.Fatal(err)
	}
	return raw, tc
}

// inUse is the process's live heap and goroutine stacks, after a
// collection.
func inUse() int64 {
	heap, stacks := heapAndStacks()
	return heap + stacks
}

// heapAndStacks is inUse in its two parts.
func heapAndStacks() (heap, stacks int64) {
	runtime.GC()
	runtime.GC() // and the pools' victims
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc), int64(m.StackInuse)
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

var heldProfiles = flag.String("held.profiles", "", "TestSendTimeoutMemory writes, for each path, the heap profile and the goroutines at the point it measures to this prefix, with the path's name and .heap or .goroutine appended")

// writeProfiles writes the heap profile and the goroutines with their
// stacks to prefix.heap and prefix.goroutine.
func writeProfiles(t *testing.T, prefix string) {
	t.Helper()
	for _, p := range []struct {
		name  string
		debug int
	}{{"heap", 0}, {"goroutine", 1}} {
		f, err := os.Create(prefix + "." + p.name)
		if err != nil {
			t.Fatal(err)
		}
		err = pprof.Lookup(p.name).WriteTo(f, p.debug)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}
