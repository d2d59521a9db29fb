package proxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/freeport"
	"github.com/svcnet/svcnet/internal/ingress/route"
	"github.com/svcnet/svcnet/internal/ingress/upstream"
)

// cannedPod answers every request with resp, written as it is, and closes
// the connection when close.
func cannedPod(t *testing.T, resp string, close bool) string {
	return rawPod(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			r, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, r.Body)
			if _, err := io.WriteString(c, resp); err != nil || close {
				return
			}
		}
	})
}

// answer is what a client sees of one response, the parts that must not
// depend on which path served it.
type answer struct {
	Status   int
	Header   http.Header
	TE       []string
	Length   int64
	Body     string
	Received string // the pod's echo of the request, with made IDs masked
}

var madeID = regexp.MustCompile(`"X-Request-Id":"[0-9a-f]{32}"`)

// roundTrip sends raw on a new connection and reads one answer.
func roundTrip(t *testing.T, addr, raw, method string) answer {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: method})
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if errors.Is(err, syscall.ECONNRESET) {
		// A server that closes with a request half read (431) resets
		// the connection, at times before the client read the body.
		body = []byte("reset")
	} else if err != nil {
		t.Fatalf("reading the body: %v", err)
	}
	resp.Header.Del("Date")
	a := answer{Status: resp.StatusCode, Header: resp.Header, TE: resp.TransferEncoding, Length: resp.ContentLength, Body: string(body)}
	if strings.HasPrefix(a.Body, `{"body"`) {
		a.Received, a.Body = madeID.ReplaceAllString(a.Body, `"X-Request-Id":"made"`), ""
	}
	return a
}

// TestEngine sends each request to net/http's server alone and to the
// engine in front of it, as the ingress serves plain HTTP: the answers
// and what the pods receive must be the same, and the engine must
// have served exactly the requests it is meant to.
func TestEngine(t *testing.T) {
	testEngine(t, serveEngine)
}

func testEngine(t *testing.T, serveFront func(testing.TB, *Proxy, int) *front) {
	// A pod that accepts and closes without answering, as one that stops.
	mute := rawPod(t, func(c net.Conn) { _, _ = bufio.NewReader(c).ReadString('\n') })
	// A chunked answer larger than the pod buffer, in chunks of odd
	// sizes: chunk lines are split across reads.
	var chunks strings.Builder
	for i := range 300 {
		n := 97 + i%13
		fmt.Fprintf(&chunks, "%x\r\n%s\r\n", n, strings.Repeat(string(rune('a'+i%26)), n))
	}
	bigChunks := "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks.String() + "0\r\n\r\n"
	big := "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: X-Secret\r\nX-Secret: s\r\nX-Big: " + strings.Repeat("b", 20<<10) + "\r\nContent-Length: 2\r\n\r\nok"
	eps := map[string][]string{
		"alpha":     {echo(t, "a")},
		"empty":     nil,
		"chunked":   {cannedPod(t, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\nX-Trailer: t\r\n\r\n", false)},
		"eof":       {cannedPod(t, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nuntil the end", true)},
		"http10":    {cannedPod(t, "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 4\r\n\r\nold!", true)},
		"early":     {cannedPod(t, "HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhints", false)},
		"nocontent": {cannedPod(t, "HTTP/1.1 204 No Content\r\nX-A: 1\r\n\r\n", false)},
		"hop":       {cannedPod(t, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: X-Secret\r\nX-Secret: s\r\nKeep-Alive: timeout=5\r\nContent-Length: 2\r\n\r\nok", false)},
		"big":       {cannedPod(t, big, false)},
		"short":     {cannedPod(t, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 10\r\n\r\nabc", true)},
		"garbage":   {cannedPod(t, "SSH-2.0-OpenSSH\r\n\r\n", true)},
		"refused":   {freeport.Addr(t), freeport.Addr(t)},
		"flaky":     {mute, mute, echo(t, "f")},
		"mute":      {mute},
		"headbody":  {cannedPod(t, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello", false)},
		"bigchunks": {cannedPod(t, bigChunks, false)},
		"extension": {cannedPod(t, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n3;name=value\r\nabc\r\n0;last\r\n\r\n", false)},
	}
	p := New(Options{})
	t.Cleanup(p.Close)
	p.Set(routes(t, eps, nil))
	netHTTP := httptest.NewUnstartedServer(p.Handler(8080))
	netHTTP.Config.MaxHeaderBytes = 32 << 10 // as the ingress's
	netHTTP.Start()
	t.Cleanup(netHTTP.Close)
	fast := serveFront(t, p, 8080)

	get := func(path string, fields ...string) string {
		return "GET " + path + " HTTP/1.1\r\nHost: app.example\r\n" + strings.Join(fields, "") + "\r\n"
	}
	tests := []struct {
		name   string
		raw    string
		method string
		fast   bool // served by the engine
		status int
	}{
		{"plain", get("/alpha"), "GET", true, 200},
		{"query", get("/alpha/x?a=1&b=/c"), "GET", true, 200},
		{"head", "HEAD /alpha HTTP/1.1\r\nHost: app.example\r\n\r\n", "HEAD", true, 200},
		{"forwarded fields from the client", get("/alpha", "X-Forwarded-For: 6.6.6.6\r\n", "X-Real-IP: 6.6.6.6\r\n", "Forwarded: for=6.6.6.6\r\n", "X-Forwarded-Host: evil\r\n", "X-Request-ID: given-1\r\n"), "GET", true, 200},
		{"empty request id", get("/alpha", "X-Request-ID: \r\n"), "GET", true, 200},
		{"host with case and port", "GET /alpha HTTP/1.1\r\nHost: APP.example:8080\r\n\r\n", "GET", true, 200},
		{"close", get("/alpha", "Connection: close\r\n"), "GET", true, 200},
		{"hop-by-hop fields", get("/alpha", "Keep-Alive: 5\r\n", "Proxy-Connection: keep-alive\r\n", "Proxy-Authorization: x\r\n", "Connection: keep-alive\r\n"), "GET", true, 200},
		{"repeated fields", get("/alpha", "Accept: a\r\n", "Accept: b\r\n", "X-Custom:  spaced  \r\n"), "GET", true, 200},
		{"content-length 0", "POST /alpha HTTP/1.1\r\nHost: app.example\r\nContent-Length: 0\r\n\r\n", "POST", true, 200},
		{"chunked answer", get("/chunked"), "GET", true, 200},
		{"chunked answer over the pod buffer", get("/bigchunks"), "GET", true, 200},
		{"chunk extensions", get("/extension"), "GET", true, 200},
		{"chunked answer to HEAD", "HEAD /chunked HTTP/1.1\r\nHost: app.example\r\n\r\n", "HEAD", true, 200},
		{"answer until the pod closes", get("/eof"), "GET", true, 200},
		{"HTTP/1.0 answer", get("/http10"), "GET", true, 200},
		{"informational answer first", get("/early"), "GET", true, 200},
		{"no content", get("/nocontent"), "GET", true, 204},
		{"hop-by-hop answer fields", get("/hop"), "GET", true, 200},
		{"answer head over the buffer", get("/big"), "GET", true, 200},
		{"a body answered to HEAD", "HEAD /headbody HTTP/1.1\r\nHost: app.example\r\n\r\n", "HEAD", true, 200},
		{"the next request to that pod", get("/headbody"), "GET", true, 200},
		{"garbage answer", get("/garbage"), "GET", true, 502},
		{"every endpoint refuses", get("/refused"), "GET", true, 502},
		{"pods that answer nothing, then one that does", get("/flaky"), "GET", true, 200},
		{"a pod that answers nothing", get("/mute"), "GET", true, 502},

		{"no route", get("/nothing"), "GET", false, 404},
		{"no endpoint", get("/empty"), "GET", false, 503},
		{"path to clean", get("/alpha//x/../y"), "GET", false, 200},
		{"escaped path", get("/alph%61"), "GET", false, 200},
		{"body", "POST /alpha HTTP/1.1\r\nHost: app.example\r\nContent-Length: 4\r\n\r\nbody", "POST", false, 200},
		{"chunked body", "POST /alpha HTTP/1.1\r\nHost: app.example\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nbody\r\n0\r\n\r\n", "POST", false, 200},
		{"expect", "POST /alpha HTTP/1.1\r\nHost: app.example\r\nExpect: 100-continue\r\nContent-Length: 0\r\n\r\n", "POST", false, 200},
		{"upgrade", get("/alpha", "Connection: Upgrade\r\n", "Upgrade: websocket\r\n"), "GET", false, 200},
		{"connection naming a field", get("/alpha", "Connection: X-Hop\r\n", "X-Hop: 1\r\n"), "GET", false, 200},
		{"HTTP/1.0", "GET /alpha HTTP/1.0\r\nHost: app.example\r\n\r\n", "GET", false, 200},
		{"absolute target", "GET http://app.example/alpha HTTP/1.1\r\nHost: app.example\r\n\r\n", "GET", false, 200},
		{"no host", "GET /alpha HTTP/1.1\r\n\r\n", "GET", false, 400},
		{"two hosts", "GET /alpha HTTP/1.1\r\nHost: app.example\r\nHost: b\r\n\r\n", "GET", false, 400},
		{"space in a field name", get("/alpha", "Bad Field: x\r\n"), "GET", false, 400},
		{"bare LF", "GET /alpha HTTP/1.1\nHost: app.example\n\n", "GET", false, 200},
		{"folded field", get("/alpha", "X-A: 1\r\n", " folded\r\n"), "GET", false, 200},
		{"head over the buffer", get("/alpha", "X-Big: "+strings.Repeat("x", 5000)+"\r\n"), "GET", false, 200},
		{"head over the limit", get("/alpha", "X-Big: "+strings.Repeat("x", 40<<10)+"\r\n"), "GET", false, 431},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := roundTrip(t, netHTTP.Listener.Addr().String(), tt.raw, tt.method)
			before := fast.handoffs.Load()
			got := roundTrip(t, fast.addr, tt.raw, tt.method)
			if handed := fast.handoffs.Load() != before; handed == tt.fast {
				t.Errorf("served by the engine: %v, want %v", !handed, tt.fast)
			}
			if got.Status != tt.status {
				t.Errorf("status %d, want %d", got.Status, tt.status)
			}
			if got.Body == "reset" || want.Body == "reset" {
				got.Body, want.Body = "", "" // which side saw the reset is luck
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("the engine's answer differs from net/http's:\nfast:     %.2000s\nnet/http: %.2000s", fmt.Sprintf("%+v", got), fmt.Sprintf("%+v", want))
			}
		})
	}
}

// routes is one Ingress with those annotations that routes
// app.example/NAME to a backend NAME, with the endpoints given.
func routes(t testing.TB, eps map[string][]string, annotations map[string]string) (*route.Table, []*upstream.Upstream) {
	t.Helper()
	prefix := ptr.To(networkingv1.PathTypePrefix)
	var paths []networkingv1.HTTPIngressPath
	for svc := range eps {
		paths = append(paths, networkingv1.HTTPIngressPath{Path: "/" + svc, PathType: prefix,
			Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: svc, Port: networkingv1.ServiceBackendPort{Number: 80}}}})
	}
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", Annotations: annotations},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: "app.example",
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: paths}}}}}}
	table, problems := route.Build([]*networkingv1.Ingress{ing})
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	var ups []*upstream.Upstream
	for _, ref := range table.Backends {
		u := upstream.New(ref)
		u.Set(eps[ref.Name])
		ups = append(ups, u)
	}
	return table, ups
}

// TestEngineConnection serves several requests on one connection:
// pipelined ones on the engine, then one for net/http, after which the
// connection stays with net/http and still answers.
func TestEngineConnection(t *testing.T) {
	testEngineConnection(t, serveEngine)
}

func testEngineConnection(t *testing.T, serveFront func(testing.TB, *Proxy, int) *front) {
	p := New(Options{})
	t.Cleanup(p.Close)
	big := cannedPod(t, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-Big: "+strings.Repeat("b", 20<<10)+"\r\nContent-Length: 2\r\n\r\nok", false)
	p.Set(routes(t, map[string][]string{"alpha": {echo(t, "a")}, "big": {big}}, nil))
	f := serveFront(t, p, 8080)
	c := dialFront(t, f.addr, 10*time.Second)
	br := bufio.NewReader(c)
	read := func(want string) {
		t.Helper()
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Fatalf("status %d body %q (%v), want one with %q", resp.StatusCode, body, err, want)
		}
	}
	// Two requests in one write: both answered, in order.
	fmt.Fprint(c, "GET /alpha/1 HTTP/1.1\r\nHost: app.example\r\n\r\nGET /alpha/2 HTTP/1.1\r\nHost: app.example\r\n\r\n")
	read(`"uri":"/alpha/1"`)
	read(`"uri":"/alpha/2"`)
	// An answer whose head is over the pod buffer is read on a
	// goroutine; the connection then comes back to the engine, with the
	// request pipelined behind.
	fmt.Fprint(c, "GET /big HTTP/1.1\r\nHost: app.example\r\n\r\nGET /alpha/after HTTP/1.1\r\nHost: app.example\r\n\r\n")
	read("ok")
	read(`"uri":"/alpha/after"`)
	fmt.Fprint(c, "GET /alpha/again HTTP/1.1\r\nHost: app.example\r\n\r\n")
	read(`"uri":"/alpha/again"`)
	if n := f.handoffs.Load(); n != 0 {
		t.Fatalf("%d connections handed to net/http, want none yet", n)
	}
	// A request with a body hands the connection over, with the bytes
	// already read: the next request pipelined behind it too.
	fmt.Fprint(c, "POST /alpha/3 HTTP/1.1\r\nHost: app.example\r\nContent-Length: 4\r\n\r\nbodyGET /alpha/4 HTTP/1.1\r\nHost: app.example\r\n\r\n")
	read(`"body":"body"`)
	read(`"uri":"/alpha/4"`)
	if n := f.handoffs.Load(); n != 1 {
		t.Fatalf("%d connections handed to net/http, want 1", n)
	}
	fmt.Fprint(c, "GET /alpha/5 HTTP/1.1\r\nHost: app.example\r\n\r\n")
	read(`"uri":"/alpha/5"`)
}

// TestNoAnswerRetries: a pod that closes without answering sends an
// idempotent request to the next endpoint, a POST gets its 502 (the pod
// may have acted on it).
func TestNoAnswerRetries(t *testing.T) {
	testNoAnswerRetries(t, serveEngine)
}

func testNoAnswerRetries(t *testing.T, serveFront func(testing.TB, *Proxy, int) *front) {
	mute := rawPod(t, func(c net.Conn) { _, _ = bufio.NewReader(c).ReadString('\n') })
	p := New(Options{})
	t.Cleanup(p.Close)
	p.Set(routes(t, map[string][]string{"alpha": {mute, echo(t, "a")}}, nil))
	f := serveFront(t, p, 8080)
	for _, tt := range []struct {
		method string
		want   []int // the statuses of two requests, in order of value
	}{
		{"GET", []int{200, 200}},
		{"DELETE", []int{200, 200}},
		{"POST", []int{200, 502}}, // round robin: one starts at the mute pod
	} {
		var got []int
		for range 2 {
			got = append(got, roundTrip(t, f.addr, tt.method+" /alpha HTTP/1.1\r\nHost: app.example\r\nContent-Length: 0\r\n\r\n", tt.method).Status)
		}
		slices.Sort(got)
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.method, got, tt.want)
		}
	}
}

// TestEngineStreams: an answer the pod sends in pieces reaches the
// client piece by piece, not when the pod ends it.
func TestEngineStreams(t *testing.T) {
	testEngineStreams(t, serveEngine)
}

func testEngineStreams(t *testing.T, serveFront func(testing.TB, *Proxy, int) *front) {
	more := make(chan struct{})
	pod := rawPod(t, func(c net.Conn) {
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n7\r\nevent 1\r\n")
		<-more
		fmt.Fprint(c, "7\r\nevent 2\r\n0\r\n\r\n")
	})
	p := New(Options{})
	t.Cleanup(p.Close)
	p.Set(routes(t, map[string][]string{"events": {pod}}, nil))
	f := serveFront(t, p, 8080)
	c := dialFront(t, f.addr, 0)
	fmt.Fprint(c, "GET /events HTTP/1.1\r\nHost: app.example\r\n\r\n")
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		close(more)
		t.Fatalf("the head, before the pod ends its answer: %v", err)
	}
	first := make([]byte, 7)
	_, err = io.ReadFull(resp.Body, first)
	close(more)
	if err != nil || string(first) != "event 1" {
		t.Fatalf("the first event, before the pod ends its answer: %q %v", first, err)
	}
	rest, err := io.ReadAll(resp.Body)
	if err != nil || string(rest) != "event 2" {
		t.Fatalf("the rest: %q %v", rest, err)
	}
	if n := f.handoffs.Load(); n != 0 {
		t.Fatalf("served by net/http (%d handoffs), not the engine", n)
	}
}
