package images

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/websocket"
)

// echo-basic's HTTP servers (no *_ECHO_SERVER set):
//
//	HTTP_PORT (3000)   HTTP/1.1: the echo, /ws, /retry/…, /status/NNN, /health
//	H2C_PORT (3001)    HTTP/2 with prior knowledge (or an h2c upgrade request
//	                   over HTTP/1.1): the echo only, 400 to plain HTTP/1.1
//	HTTPS_PORT (8443)  as HTTP_PORT, over TLS with TLS_SERVER_CERT and
//	                   TLS_SERVER_PRIVKEY (files; no HTTPS without both),
//	                   HTTP/1.1 and h2; TLS_CLIENT_CACERTS (a PEM file)
//	                   verifies the client certificates that are sent
//
// The echo is the request as the backend saw it, in JSON: what the
// suite's round tripper decodes (CapturedRequest) to compare the path
// (with its query), host, method, protocol, headers, namespace, pod and,
// over TLS, the SNI and the client's certificates.

// echoBasicRequest is the echo's JSON.
type echoBasicRequest struct {
	Path     string              `json:"path"`
	Host     string              `json:"host"`
	Method   string              `json:"method"`
	Proto    string              `json:"proto"`
	Headers  map[string][]string `json:"headers"`
	HTTPPort string              `json:"httpPort"`
	echoBasicPod
	TLS *echoBasicHTTPTLS `json:"tls,omitempty"`
}

// echoBasicHTTPTLS is the TLS connection of a request over HTTPS.
type echoBasicHTTPTLS struct {
	Version            string   `json:"version"`
	PeerCertificates   []string `json:"peerCertificates,omitempty"`
	ServerName         string   `json:"serverName"`
	NegotiatedProtocol string   `json:"negotiatedProtocol,omitempty"`
	CipherSuite        string   `json:"cipherSuite"`
}

func (e *echoBasic) serveHTTP(ctx context.Context) error {
	httpPort, err := e.port("HTTP_PORT", "3000")
	if err != nil {
		return err
	}
	h2cPort, err := e.port("H2C_PORT", "3001")
	if err != nil {
		return err
	}
	httpsPort, err := e.port("HTTPS_PORT", "8443")
	if err != nil {
		return err
	}
	tlsConfig, err := e.httpsConfig()
	if err != nil {
		return err
	}
	h := &echoBasicHTTP{e: e, pod: e.pod(), httpPort: httpPort, attempts: map[string]int{}}
	h2c := new(http.Protocols)
	h2c.SetHTTP1(true)
	h2c.SetUnencryptedHTTP2(true)
	servers := []echoBasicServer{
		{"http", httpPort, &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}},
		{"h2c", h2cPort, &http.Server{Handler: http.HandlerFunc(h.h2c), ReadHeaderTimeout: 10 * time.Second, Protocols: h2c}},
	}
	if tlsConfig != nil {
		servers = append(servers, echoBasicServer{"https", httpsPort, &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, TLSConfig: tlsConfig}})
	}
	var serves []func(context.Context) error
	var listeners closers
	for _, s := range servers {
		l, err := e.listen(ctx, s.name, s.port)
		if err != nil {
			listeners.closeAll()
			return err
		}
		listeners = append(listeners, l)
		serves = append(serves, func(ctx context.Context) error { return serveHTTPServer(ctx, s.srv, l) })
	}
	return serveAll(ctx, serves...)
}

// echoBasicServer is one of the HTTP servers and its port.
type echoBasicServer struct {
	name string
	port string
	srv  *http.Server
}

// httpsConfig is the HTTPS server's TLS configuration; nil without a
// certificate.
func (e *echoBasic) httpsConfig() (*tls.Config, error) {
	cert, err := e.keyPair("TLS_SERVER_CERT", "TLS_SERVER_PRIVKEY")
	if cert == nil || err != nil {
		return nil, err
	}
	c := &tls.Config{Certificates: []tls.Certificate{*cert}}
	if caFile := e.getenv("TLS_CLIENT_CACERTS"); caFile != "" {
		pemData, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("echo-basic: TLS_CLIENT_CACERTS: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pemData) {
			return nil, fmt.Errorf("echo-basic: TLS_CLIENT_CACERTS: no certificate in %s", caFile)
		}
		// A client that sends no certificate is served too.
		c.ClientAuth, c.ClientCAs = tls.VerifyClientCertIfGiven, pool
	}
	return c, nil
}

// echoBasicHTTP answers the requests of the HTTP and HTTPS servers.
type echoBasicHTTP struct {
	e        *echoBasic
	pod      echoBasicPod
	httpPort string

	mu       sync.Mutex
	attempts map[string]int // /retry/: failed answers so far, by uuid
}

func (h *echoBasicHTTP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Doubled slashes are one for routing; the echo shows the path as
	// sent. Nothing is redirected, whatever the path.
	switch p := strings.ReplaceAll(r.URL.Path, "//", "/"); {
	case p == "/ws":
		h.websocket(w, r)
	case p == "/health":
		fmt.Fprint(w, "OK")
	case strings.HasPrefix(p, "/status/"):
		h.status(w, r)
	case strings.HasPrefix(p, "/retry/"):
		h.retry(w, r)
	default:
		h.echo(w, r)
	}
}

// h2c answers the h2c server's requests: the echo, for HTTP/2 only.
func (h *echoBasicHTTP) h2c(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor != 2 && r.Header.Get("Upgrade") != "h2c" {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, "Expected h2c request")
		return
	}
	h.echo(w, r)
}

// echo answers with the request, after ?delay=DURATION. The headers
// the request lists in X-Echo-Set-Header ("Name:value,Name:value") are
// set on the response, for tests of response header filters.
func (h *echoBasicHTTP) echo(w http.ResponseWriter, r *http.Request) {
	// The suite finds mirrored requests in the pod's log by this line:
	// "Echoing back request made to PATH to client".
	h.e.logf("Echoing back request made to %s to client (%s)", r.RequestURI, r.RemoteAddr)
	if err := sleepFor(r, "delay"); err != nil {
		echoBasicError(w, err)
		return
	}
	body, err := json.Marshal(echoBasicRequest{
		Path:         r.RequestURI,
		Host:         r.Host,
		Method:       r.Method,
		Proto:        r.Proto,
		Headers:      r.Header,
		HTTPPort:     h.httpPort,
		echoBasicPod: h.pod,
		TLS:          httpTLS(r.TLS),
	})
	if err != nil {
		echoBasicError(w, err)
		return
	}
	for _, list := range r.Header.Values("X-Echo-Set-Header") {
		for _, pair := range strings.Split(list, ",") {
			name, value, _ := strings.Cut(strings.TrimSpace(pair), ":")
			if name == "" {
				continue
			}
			// As written, not canonicalized; a name given twice gets
			// its values joined.
			if old := w.Header()[name]; len(old) > 0 {
				old[0] += "," + strings.TrimSpace(value)
			} else {
				w.Header()[name] = []string{value}
			}
		}
	}
	w.Header().Set("Content-Type", "application/json") // the suite decodes only this type
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(body)
}

func httpTLS(s *tls.ConnectionState) *echoBasicHTTPTLS {
	if s == nil {
		return nil
	}
	return &echoBasicHTTPTLS{
		Version:            echoBasicTLSVersion(s.Version),
		PeerCertificates:   pemCertificates(s.PeerCertificates),
		ServerName:         s.ServerName,
		NegotiatedProtocol: s.NegotiatedProtocol,
		CipherSuite:        tls.CipherSuiteName(s.CipherSuite),
	}
}

// status answers /status/NNN with status NNN, anything else with 400.
func (h *echoBasicHTTP) status(w http.ResponseWriter, r *http.Request) {
	code := http.StatusBadRequest
	if s, ok := strings.CutPrefix(r.RequestURI, "/status/"); ok && len(s) == 3 && strings.Trim(s, "0123456789") == "" {
		if n, _ := strconv.Atoi(s); n >= 100 {
			code = n
		}
	}
	w.WriteHeader(code)
}

// retry is a backend that fails before it succeeds, for tests of route
// retries: /retry/…?uuid=ID&succeedAfter=N fails the first N requests
// of ID, then echoes. A failure is status responseCode when the query
// has one, else a reset connection; delayRetry=DURATION delays it.
func (h *echoBasicHTTP) retry(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	id := q.Get("uuid")
	if id == "" {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, "uuid is required")
		return
	}
	succeedAfter, err := strconv.Atoi(q.Get("succeedAfter"))
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, "succeedAfter is required")
		return
	}
	h.mu.Lock()
	fail := h.attempts[id] < succeedAfter
	if fail {
		h.attempts[id]++
	}
	h.mu.Unlock()
	if !fail {
		h.echo(w, r)
		return
	}
	if err := sleepFor(r, "delayRetry"); err != nil {
		echoBasicError(w, err)
		return
	}
	if code, err := strconv.Atoi(q.Get("responseCode")); err == nil {
		w.WriteHeader(code)
		return
	}
	if err := resetConnection(w); err != nil {
		echoBasicError(w, err)
	}
}

// resetConnection aborts the request's connection with a TCP RST.
func resetConnection(w http.ResponseWriter) error {
	hj, ok := w.(http.Hijacker)
	if !ok {
		return errors.New("an HTTP/2 stream's connection is not reset")
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return err
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	} else if tc, ok := conn.(*tls.Conn); ok {
		if raw, ok := tc.NetConn().(*net.TCPConn); ok {
			_ = raw.SetLinger(0)
		}
	}
	return conn.Close()
}

// websocket echoes each message of a WebSocket connection, as text or
// binary as it came.
func (h *echoBasicHTTP) websocket(w http.ResponseWriter, r *http.Request) {
	if _, ok := w.(http.Hijacker); !ok {
		http.Error(w, "WebSocket needs HTTP/1.1", http.StatusBadRequest)
		return
	}
	// Any Origin is welcome (websocket.Handler would check it).
	websocket.Server{Handler: func(ws *websocket.Conn) {
		h.e.logf("websocket connection from %s", r.RemoteAddr)
		for {
			var m wsMessage
			if err := wsMessages.Receive(ws, &m); err != nil {
				return
			}
			if err := wsMessages.Send(ws, m); err != nil {
				return
			}
		}
	}}.ServeHTTP(w, r)
}

// wsMessage is one WebSocket message and its frame type.
type wsMessage struct {
	data []byte
	kind byte
}

var wsMessages = websocket.Codec{
	Marshal: func(v any) ([]byte, byte, error) {
		m := v.(wsMessage)
		return m.data, m.kind, nil
	},
	Unmarshal: func(data []byte, kind byte, v any) error {
		*v.(*wsMessage) = wsMessage{data: data, kind: kind}
		return nil
	},
}

// sleepFor waits for the duration the query parameter key gives.
func sleepFor(r *http.Request, key string) error {
	v := r.URL.Query().Get(key)
	if v == "" {
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return err
	}
	select {
	case <-time.After(d):
		return nil
	case <-r.Context().Done():
		return r.Context().Err()
	}
}

// echoBasicError answers 500 with the error in JSON ({"message": …}).
func echoBasicError(w http.ResponseWriter, err error) {
	body, _ := json.Marshal(struct {
		Message string `json:"message"`
	}{err.Error()})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusInternalServerError)
	_, _ = w.Write(body)
}
