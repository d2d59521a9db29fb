package proxy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/freeport"
	"github.com/svcnet/svcnet/internal/syncbuf"
)

// echo is a pod: it answers its name, and what it received as JSON.
func echo(t *testing.T, name string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h := map[string]string{}
		for k := range r.Header {
			h[k] = r.Header.Get(k)
		}
		w.Header().Set("X-Pod", name)
		_ = json.NewEncoder(w).Encode(map[string]any{"pod": name, "host": r.Host, "uri": r.RequestURI, "headers": h, "body": string(body)})
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

type received struct {
	Pod     string
	Host    string
	URI     string
	Headers map[string]string
	Body    string
}

// rawPod is a pod that serves each connection with serve, then closes it.
func rawPod(t testing.TB, serve func(net.Conn)) string {
	t.Helper()
	return freeport.Serve(t, serve)
}

// upgradeEcho switches protocols and echoes lines, as a WebSocket server
// would.
func upgradeEcho(c net.Conn) {
	br := bufio.NewReader(c)
	if _, err := http.ReadRequest(br); err != nil {
		return
	}
	fmt.Fprint(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return
		}
		fmt.Fprint(c, "echo "+line)
	}
}

// setup serves one Ingress whose backends are given by service name.
func setup(t *testing.T, o Options, eps map[string][]string) (*Proxy, string) {
	t.Helper()
	return setupAnnotated(t, o, eps, nil)
}

// setupAnnotated is setup with the Ingress's annotations.
func setupAnnotated(t *testing.T, o Options, eps map[string][]string, annotations map[string]string) (*Proxy, string) {
	t.Helper()
	table, ups := routes(t, eps, annotations)
	p := New(o)
	p.Set(table, ups)
	// Served as the ingress serves plain HTTP: what the engine takes
	// is tested through its loops, the rest through net/http.
	f := serveEngine(t, p, 8080)
	t.Cleanup(p.Close)
	return p, "http://" + f.addr
}

func do(t *testing.T, method, url, host string, body io.Reader, hdr ...string) (*http.Response, received) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var got received
	_ = json.Unmarshal(data, &got)
	return resp, got
}

func TestRouting(t *testing.T) {
	a, b := echo(t, "a"), echo(t, "b")
	_, url := setup(t, Options{}, map[string][]string{"alpha": {a}, "beta": {b}, "empty": nil})
	tests := []struct {
		name, host, path string
		status           int
		pod, uri         string
	}{
		{"prefix", "app.example", "/alpha/x?q=1", 200, "a", "/alpha/x?q=1"},
		{"other service", "app.example:8080", "/beta", 200, "b", "/beta"},
		{"cleaned path", "app.example", "/beta/../alpha/", 200, "a", "/alpha/"},
		{"no rule", "app.example", "/gamma", 404, "", ""},
		{"unknown host", "other.example", "/alpha", 404, "", ""},
		{"no endpoints", "app.example", "/empty", 503, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, got := do(t, "GET", url+tt.path, tt.host, nil)
			if resp.StatusCode != tt.status || got.Pod != tt.pod || got.URI != tt.uri {
				t.Fatalf("%s%s: %d from %q uri %q, want %d from %q uri %q", tt.host, tt.path, resp.StatusCode, got.Pod, got.URI, tt.status, tt.pod, tt.uri)
			}
		})
	}
}

func TestHeaders(t *testing.T) {
	_, url := setup(t, Options{}, map[string][]string{"alpha": {echo(t, "a")}})
	resp, got := do(t, "GET", url+"/alpha", "App.Example", nil,
		"X-Forwarded-For", "6.6.6.6", "X-Real-IP", "6.6.6.6", "X-Request-ID", "abc-123",
		"Connection", "X-Hop", "X-Hop", "secret", "Te", "trailers")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	want := map[string]string{
		"X-Forwarded-For":   "127.0.0.1", // the client's own is not trusted
		"X-Real-Ip":         "127.0.0.1",
		"X-Forwarded-Host":  "App.Example",
		"X-Forwarded-Proto": "http",
		"X-Forwarded-Port":  "8080",
		"X-Request-Id":      "abc-123",
		"X-Hop":             "", // named in Connection: hop-by-hop
	}
	for k, v := range want {
		if got.Headers[k] != v {
			t.Errorf("%s: %q, want %q", k, got.Headers[k], v)
		}
	}
	if got.Host != "App.Example" {
		t.Errorf("Host %q: not passed through", got.Host)
	}
	_, got = do(t, "GET", url+"/alpha", "app.example", nil)
	if id := got.Headers["X-Request-Id"]; len(id) != 32 {
		t.Errorf("X-Request-ID %q: none made", id)
	}
}

func TestRetryOnConnectError(t *testing.T) {
	a := echo(t, "a")
	_, url := setup(t, Options{}, map[string][]string{"alpha": {freeport.Addr(t), freeport.Addr(t), a}})
	for i := 0; i < 6; i++ {
		resp, got := do(t, "POST", url+"/alpha", "app.example", strings.NewReader("payload"))
		if resp.StatusCode != 200 || got.Pod != "a" || got.Body != "payload" {
			t.Fatalf("request %d: %d from %q body %q", i, resp.StatusCode, got.Pod, got.Body)
		}
	}
	_, url = setup(t, Options{}, map[string][]string{"alpha": {freeport.Addr(t)}})
	if resp, _ := do(t, "GET", url+"/alpha", "app.example", nil); resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("every endpoint refused: %d, want 502", resp.StatusCode)
	}
}

func TestUpstreamFailures(t *testing.T) {
	// A pod that accepts and closes without answering.
	mute := rawPod(t, func(c net.Conn) { _, _ = bufio.NewReader(c).ReadString('\n') })
	// A pod that answers too late.
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(5 * time.Second):
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(slow.Close)
	_, url := setup(t, Options{ReadTimeout: 200 * time.Millisecond, MaxBodyBytes: 1000},
		map[string][]string{"mute": {mute}, "slow": {slow.Listener.Addr().String()}, "alpha": {echo(t, "a")}})
	tests := []struct {
		name   string
		method string
		path   string
		body   io.Reader
		status int
	}{
		{"answers nothing", "GET", "/mute", nil, http.StatusBadGateway},
		{"answers too late", "GET", "/slow", nil, http.StatusGatewayTimeout},
		{"body over the limit", "POST", "/alpha", bytes.NewReader(make([]byte, 1001)), http.StatusRequestEntityTooLarge},
		{"streamed body over the limit", "POST", "/alpha", io.MultiReader(strings.NewReader(strings.Repeat("x", 2000))), http.StatusRequestEntityTooLarge},
		{"body at the limit", "POST", "/alpha", bytes.NewReader(make([]byte, 1000)), http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if resp, _ := do(t, tt.method, url+tt.path, "app.example", tt.body); resp.StatusCode != tt.status {
				t.Fatalf("%d, want %d", resp.StatusCode, tt.status)
			}
		})
	}
}

func TestUpgradeAndStreaming(t *testing.T) {
	// A pod that switches protocols and echoes lines, as a WebSocket would.
	ws := rawPod(t, upgradeEcho)
	p, url := setup(t, Options{}, map[string][]string{"ws": {ws}})
	open := func() (net.Conn, *bufio.Reader) {
		t.Helper()
		c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		fmt.Fprint(c, "GET /ws HTTP/1.1\r\nHost: app.example\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("upgrade: %v %v", resp, err)
		}
		return c, br
	}
	echoes := func(c net.Conn, br *bufio.Reader) error {
		for i := 0; i < 3; i++ {
			fmt.Fprintf(c, "line %d\n", i)
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			got, err := br.ReadString('\n')
			if err != nil || got != fmt.Sprintf("echo line %d\n", i) {
				return fmt.Errorf("through the upgraded connection: %q %v", got, err)
			}
		}
		return nil
	}
	c, br := open()
	if err := echoes(c, br); err != nil {
		t.Fatal(err)
	}
	// Another endpoint joins: the tunnel stays. Its pod leaves: the
	// tunnel is closed.
	u := p.cfg.Load().ups[0]
	u.Set([]string{ws, freeport.Addr(t)})
	if err := echoes(c, br); err != nil {
		t.Fatalf("after an unrelated endpoint change: %v", err)
	}
	u.Set([]string{freeport.Addr(t)})
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := br.ReadString('\n'); err != io.EOF {
		t.Fatalf("the tunnel to a pod that left: read %v, want EOF", err)
	}
}

func TestAccessLog(t *testing.T) {
	var buf syncbuf.Buffer
	p, url := setup(t, Options{AccessLog: &buf}, map[string][]string{"alpha": {echo(t, "a")}})
	do(t, "GET", url+"/alpha/\"quoted\"", "app.example", nil, "X-Request-ID", "id-1")
	do(t, "GET", url+"/nothing", "app.example", nil)
	p.Close()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("log lines: %q", buf.String())
	}
	var first, second map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatalf("%q: %v", lines[0], err)
	}
	if err := json.Unmarshal([]byte(lines[1]), &second); err != nil {
		t.Fatalf("%q: %v", lines[1], err)
	}
	if first["status"] != 200.0 || first["path"] != `/alpha/"quoted"` || first["ingress"] != "ns/web" ||
		first["service"] != "ns/alpha:80" || first["request_id"] != "id-1" || first["upstream"] == nil {
		t.Errorf("first line: %v", first)
	}
	if second["status"] != 404.0 || second["ingress"] != nil {
		t.Errorf("second line: %v", second)
	}
}
