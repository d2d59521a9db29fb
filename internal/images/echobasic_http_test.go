package images

import (
	"bytes"
	"cmp"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/websocket"
)

// capturedRequest decodes the echo as the suite's round tripper does:
// the JSON names of its CapturedRequest (and the service, which its UDP
// and TCP clients read).
type capturedRequest struct {
	Path      string              `json:"path"`
	Host      string              `json:"host"`
	Method    string              `json:"method"`
	Protocol  string              `json:"proto"`
	Headers   map[string][]string `json:"headers"`
	HTTPPort  string              `json:"httpPort,omitempty"`
	Namespace string              `json:"namespace"`
	Pod       string              `json:"pod"`
	Service   string              `json:"service"`
	TLS       struct {
		Version            string   `json:"version"`
		ServerName         string   `json:"serverName"`
		NegotiatedProtocol string   `json:"negotiatedProtocol"`
		CipherSuite        string   `json:"cipherSuite"`
		PeerCertificates   []string `json:"peerCertificates"`
	} `json:"tls"`
}

// echoAnswer is a response as the suite's round tripper sees it: the
// echo is decoded only when the response says it is JSON.
type echoAnswer struct {
	status   int
	proto    string
	header   http.Header
	body     string
	captured *capturedRequest
}

func echoRoundTrip(t *testing.T, rt http.RoundTripper, method, url, host string, header map[string]string) (*echoAnswer, error) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	client := &http.Client{Transport: rt, Timeout: 5 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	a := &echoAnswer{status: resp.StatusCode, proto: resp.Proto, header: resp.Header, body: string(body)}
	if resp.Header.Get("Content-type") == "application/json" {
		a.captured = &capturedRequest{}
		if err := json.Unmarshal(body, a.captured); err != nil {
			t.Fatalf("%s %s: the echo is not JSON: %v\n%s", method, url, err, body)
		}
	}
	return a, nil
}

// h1Transport speaks HTTP/1.1 only, without keep-alives (as the suite).
func h1Transport(config *tls.Config) *http.Transport {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	return &http.Transport{TLSClientConfig: config, Protocols: p, DisableKeepAlives: true}
}

// h2Transport speaks HTTP/2 only: over TLS with config, else with prior
// knowledge (h2c).
func h2Transport(config *tls.Config) *http.Transport {
	p := new(http.Protocols)
	if config != nil {
		p.SetHTTP2(true)
	} else {
		p.SetUnencryptedHTTP2(true)
	}
	return &http.Transport{TLSClientConfig: config, Protocols: p, DisableKeepAlives: true}
}

// TestEchoBasicHTTP: the HTTP server's paths.
func TestEchoBasicHTTP(t *testing.T) {
	addrs, log := startEchoBasic(t, echoBasicEnv(), "http", "h2c")
	for _, tc := range []struct {
		name, method, target, host string
		header                     map[string]string
		wantStatus                 int
		wantEcho                   bool // the echo of the request
		wantHeader                 map[string]string
		wantBody                   string
	}{
		{name: "echo", target: "/backend-timeout?x=1", host: "example.com", header: map[string]string{"X-Jitter": "7"}, wantStatus: 200, wantEcho: true},
		{name: "method", method: "PATCH", target: "/", wantStatus: 200, wantEcho: true},
		{name: "doubled slashes", target: "//a//b", wantStatus: 200, wantEcho: true},
		{name: "dot segments", target: "/a/../b/./c", wantStatus: 200, wantEcho: true},
		{name: "no backend headers", target: "/", header: map[string]string{"X-Echo-Set-Header": ""}, wantStatus: 200, wantEcho: true},
		{name: "backend headers", target: "/headers", header: map[string]string{"X-Echo-Set-Header": "X-Header-Set:set-val, Another-Header:v1,X-Dup:a,X-Dup: b"},
			wantStatus: 200, wantEcho: true, wantHeader: map[string]string{"X-Header-Set": "set-val", "Another-Header": "v1", "X-Dup": "a,b"}},
		{name: "delay", target: "/?delay=20ms", wantStatus: 200, wantEcho: true},
		{name: "bad delay", target: "/?delay=soon", wantStatus: 500, wantBody: `{"message":"time: invalid duration \"soon\""}`},
		{name: "status", target: "/status/503", wantStatus: 503},
		{name: "status 4 digits", target: "/status/5030", wantStatus: 400},
		{name: "status not a number", target: "/status/abc", wantStatus: 400},
		{name: "health", target: "/health", wantStatus: 200, wantBody: "OK"},
		{name: "retry without uuid", target: "/retry/x?succeedAfter=1", wantStatus: 400, wantBody: "uuid is required"},
		{name: "retry without count", target: "/retry/x?uuid=u", wantStatus: 400, wantBody: "succeedAfter is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method := cmp.Or(tc.method, "GET")
			a, err := echoRoundTrip(t, h1Transport(nil), method, "http://"+addrs["http"]+tc.target, tc.host, tc.header)
			if err != nil {
				t.Fatal(err)
			}
			if a.status != tc.wantStatus {
				t.Errorf("status %d, want %d (%s)", a.status, tc.wantStatus, a.body)
			}
			if tc.wantBody != "" && a.body != tc.wantBody {
				t.Errorf("body %q, want %q", a.body, tc.wantBody)
			}
			for k, v := range tc.wantHeader {
				if got := strings.Join(a.header.Values(k), ","); got != v {
					t.Errorf("response header %s = %q, want %q", k, got, v)
				}
			}
			if !tc.wantEcho {
				return
			}
			c := a.captured
			if c == nil {
				t.Fatalf("no echo: Content-Type %q", a.header.Get("Content-Type"))
			}
			wantHost := cmp.Or(tc.host, addrs["http"])
			if c.Path != tc.target || c.Method != method || c.Host != wantHost || c.Protocol != "HTTP/1.1" || c.HTTPPort != "0" {
				t.Errorf("echo path %q method %q host %q proto %q httpPort %q, want %q %q %q HTTP/1.1 0", c.Path, c.Method, c.Host, c.Protocol, c.HTTPPort, tc.target, method, wantHost)
			}
			if c.Namespace != "gateway-conformance-infra" || c.Pod != "infra-backend-v1-abc-123" || c.Service != "infra-backend-v1" {
				t.Errorf("echo namespace %q pod %q service %q", c.Namespace, c.Pod, c.Service)
			}
			for k, v := range tc.header {
				if got := strings.Join(c.Headers[k], ","); got != v {
					t.Errorf("echo header %s = %q, want %q", k, got, v)
				}
			}
			if c.TLS.Version != "" {
				t.Errorf("echo of plain HTTP has TLS %+v", c.TLS)
			}
			if got := a.header.Get("X-Content-Type-Options"); got != "nosniff" {
				t.Errorf("X-Content-Type-Options %q", got)
			}
			// The suite finds mirrored requests in the log by this line.
			if re := regexp.MustCompile(fmt.Sprintf("Echoing back request made to %s to client", regexp.QuoteMeta(tc.target))); !re.MatchString(log.String()) {
				t.Errorf("the log does not match %s:\n%s", re, log)
			}
		})
	}
}

// TestEchoBasicRetry: /retry/ fails a request ID's first requests, with
// a status or a reset connection, then echoes.
func TestEchoBasicRetry(t *testing.T) {
	addrs, _ := startEchoBasic(t, echoBasicEnv(), "http", "h2c")
	for _, tc := range []struct {
		name  string
		query string
		want  []int // statuses in turn; 0: the connection is reset
	}{
		{"status until the third", "responseCode=503&succeedAfter=2", []int{503, 503, 200, 200}},
		{"status never", "responseCode=500&succeedAfter=0", []int{200}},
		{"delayed status", "responseCode=502&succeedAfter=1&delayRetry=10ms", []int{502, 200}},
		{"reset", "succeedAfter=2", []int{0, 0, 200}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := fmt.Sprintf("http://%s/retry/code-all?uuid=%s&%s", addrs["http"], strings.ReplaceAll(tc.name, " ", "-"), tc.query)
			for i, want := range tc.want {
				a, err := echoRoundTrip(t, h1Transport(nil), "GET", url, "", nil)
				switch {
				case want == 0 && err == nil:
					t.Errorf("request %d: status %d, want a reset connection", i, a.status)
				case want != 0 && err != nil:
					t.Errorf("request %d: %v, want status %d", i, err, want)
				case want != 0 && a.status != want:
					t.Errorf("request %d: status %d, want %d", i, a.status, want)
				case want == 200 && (a.captured == nil || !strings.HasPrefix(a.captured.Path, "/retry/code-all?")):
					t.Errorf("request %d: no echo: %q", i, a.body)
				}
			}
		})
	}
}

// TestEchoBasicH2C: the h2c server answers HTTP/2 with prior knowledge
// (the suite's H2C_PRIOR_KNOWLEDGE protocol, through a gateway) and
// refuses plain HTTP/1.1.
func TestEchoBasicH2C(t *testing.T) {
	addrs, _ := startEchoBasic(t, echoBasicEnv(), "http", "h2c")
	a, err := echoRoundTrip(t, h2Transport(nil), "GET", "http://"+addrs["h2c"]+"/h2c?x=y", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.status != 200 || a.proto != "HTTP/2.0" || a.captured == nil || a.captured.Protocol != "HTTP/2.0" || a.captured.Path != "/h2c?x=y" {
		t.Errorf("h2c: %d %s %+v", a.status, a.proto, a.captured)
	}
	a, err = echoRoundTrip(t, h1Transport(nil), "GET", "http://"+addrs["h2c"]+"/", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.status != 400 || a.body != "Expected h2c request" {
		t.Errorf("HTTP/1.1 to h2c: %d %q, want 400", a.status, a.body)
	}
}

// TestEchoBasicHTTPS: the HTTPS server serves the manifests' certificate
// and reports the TLS connection, client certificates included.
func TestEchoBasicHTTPS(t *testing.T) {
	pki := newTestPKI(t)
	withCA, _ := startEchoBasic(t, echoBasicEnv("TLS_SERVER_CERT", pki.certFile, "TLS_SERVER_PRIVKEY", pki.keyFile, "TLS_CLIENT_CACERTS", pki.caFile), "http", "h2c", "https")
	withoutCA, _ := startEchoBasic(t, echoBasicEnv("TLS_SERVER_CERT", pki.certFile, "TLS_SERVER_PRIVKEY", pki.keyFile), "http", "h2c", "https")
	for _, tc := range []struct {
		name       string
		addr       string
		rt         http.RoundTripper
		target     string
		wantErr    bool
		wantStatus int
		wantProto  string // of the echo
		wantALPN   string // "": the client offers none
		wantPeer   bool   // the client's certificate in the echo
	}{
		{name: "client certificate over h2", addr: withCA["https"], rt: h2Transport(pki.clientConfig(pki.client)), target: "/", wantStatus: 200, wantProto: "HTTP/2.0", wantALPN: "h2", wantPeer: true},
		{name: "client certificate over HTTP/1.1", addr: withCA["https"], rt: h1Transport(pki.clientConfig(pki.client)), target: "/x?y=z", wantStatus: 200, wantProto: "HTTP/1.1", wantPeer: true},
		{name: "no client certificate", addr: withCA["https"], rt: h1Transport(pki.clientConfig()), target: "/", wantStatus: 200, wantProto: "HTTP/1.1"},
		{name: "client certificate of another CA", addr: withCA["https"], rt: h1Transport(pki.clientConfig(pki.strangerClient)), target: "/", wantErr: true},
		{name: "client certificate not asked for", addr: withoutCA["https"], rt: h1Transport(pki.clientConfig(pki.client)), target: "/", wantStatus: 200, wantProto: "HTTP/1.1"},
		{name: "retry over TLS", addr: withoutCA["https"], rt: h1Transport(pki.clientConfig()), target: "/retry/a?uuid=tls&succeedAfter=1&responseCode=504", wantStatus: 504},
		{name: "websocket over h2", addr: withoutCA["https"], rt: h2Transport(pki.clientConfig()), target: "/ws", wantStatus: 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := echoRoundTrip(t, tc.rt, "GET", "https://"+tc.addr+tc.target, "abc.example.com", nil)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("status %d, want a failed handshake", a.status)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if a.status != tc.wantStatus {
				t.Fatalf("status %d, want %d (%s)", a.status, tc.wantStatus, a.body)
			}
			if tc.wantProto == "" {
				return
			}
			c := a.captured
			if c == nil {
				t.Fatalf("no echo: %q", a.body)
			}
			if c.Path != tc.target || c.Protocol != tc.wantProto || c.Host != "abc.example.com" || c.Namespace != "gateway-conformance-infra" {
				t.Errorf("echo %+v", c)
			}
			if c.TLS.ServerName != "abc.example.com" || c.TLS.Version != "TLSv1.3" || c.TLS.NegotiatedProtocol != tc.wantALPN || !strings.HasPrefix(c.TLS.CipherSuite, "TLS_") {
				t.Errorf("echo TLS %+v, want SNI abc.example.com, TLSv1.3, ALPN %q", c.TLS, tc.wantALPN)
			}
			// The suite looks for its client certificate's PEM text.
			if got := slices.Contains(c.TLS.PeerCertificates, pki.clientPEM); got != tc.wantPeer {
				t.Errorf("client certificate in the echo: %v, want %v (%d certificates)", got, tc.wantPeer, len(c.TLS.PeerCertificates))
			}
		})
	}
}

// TestEchoBasicWebSocket: /ws echoes each message, text and binary, as
// the suite's WebSocket test sends them.
func TestEchoBasicWebSocket(t *testing.T) {
	addrs, _ := startEchoBasic(t, echoBasicEnv(), "http", "h2c")
	ws, err := websocket.Dial("ws://"+addrs["http"]+"/ws", "", "ws://gateway/TestEchoBasicWebSocket")
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	if err := ws.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	for _, msg := range []any{"Websocket Support!", []byte{1, 2, 3, 4, 5, 6, 7}, "again"} {
		if err := websocket.Message.Send(ws, msg); err != nil {
			t.Fatal(err)
		}
		var got wsMessage
		if err := wsMessages.Receive(ws, &got); err != nil {
			t.Fatal(err)
		}
		want := wsMessage{kind: websocket.TextFrame}
		switch m := msg.(type) {
		case string:
			want.data = []byte(m)
		case []byte:
			want.data, want.kind = m, websocket.BinaryFrame
		}
		if !bytes.Equal(got.data, want.data) || got.kind != want.kind {
			t.Errorf("sent %v (frame %d), got %v (frame %d)", want.data, want.kind, got.data, got.kind)
		}
	}
}
