package images

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/freeport"
	"github.com/svcnet/svcnet/internal/syncbuf"
)

// The tests run agnhost's servers on loopback only, on ports the system
// picks (port flags of 0; environment names ending in 0 for porter).

func testAgnhostEnv(t *testing.T) (*agnhostEnv, *syncbuf.Buffer, *syncbuf.Buffer) {
	t.Helper()
	stdout, stderr := &syncbuf.Buffer{}, &syncbuf.Buffer{}
	return &agnhostEnv{
		argv0:       "/agnhost",
		stdout:      stdout,
		stderr:      stderr,
		shell:       "/bin/sh",
		resolvConf:  filepath.Join(t.TempDir(), "resolv.conf"),
		etcHosts:    filepath.Join(t.TempDir(), "hosts"),
		uploadDir:   t.TempDir(),
		webRoot:     t.TempDir(),
		bindHost:    "127.0.0.1",
		dialTimeout: 300 * time.Millisecond,
	}, stdout, stderr
}

// agnhostRun is a subcommand running in the background.
type agnhostRun struct {
	cancel context.CancelFunc
	done   chan error
	addrs  map[string][]net.Addr
}

// startAgnhost runs args and waits for n servers to listen.
func startAgnhost(t *testing.T, env *agnhostEnv, n int, args ...string) *agnhostRun {
	t.Helper()
	type announcement struct {
		name string
		addr net.Addr
	}
	announced := make(chan announcement, 32)
	env.listening = func(name string, a net.Addr) { announced <- announcement{name, a} }
	ctx, cancel := context.WithCancel(context.Background())
	r := &agnhostRun{cancel: cancel, done: make(chan error, 1), addrs: map[string][]net.Addr{}}
	go func() { r.done <- env.run(ctx, args) }()
	for range n {
		select {
		case a := <-announced:
			r.addrs[a.name] = append(r.addrs[a.name], a.addr)
		case err := <-r.done:
			cancel()
			t.Fatalf("%v ended before listening: %v", args, err)
		case <-time.After(5 * time.Second):
			cancel()
			t.Fatalf("%v did not listen", args)
		}
	}
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(5 * time.Second):
			t.Errorf("%v did not stop", args)
		}
	})
	return r
}

func (r *agnhostRun) addr(t *testing.T, name string) string {
	t.Helper()
	if len(r.addrs[name]) == 0 {
		t.Fatalf("no %s server among %v", name, r.addrs)
	}
	return r.addrs[name][0].String()
}

func (r *agnhostRun) port(t *testing.T, name string) string {
	_, port, _ := net.SplitHostPort(r.addr(t, name))
	return port
}

// wait returns the subcommand's result.
func (r *agnhostRun) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.done:
		r.done <- err // for the cleanup
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("the subcommand did not end")
		return nil
	}
}

var testHTTPClient = &http.Client{
	Timeout:       5 * time.Second,
	Transport:     &http.Transport{Proxy: nil, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

func httpDo(t *testing.T, method, url string, body io.Reader, header http.Header) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := testHTTPClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	code, _, body := httpDo(t, http.MethodGet, url, nil, nil)
	return code, body
}

// udpAsk sends msg to addr and returns the answer, "" if none comes
// within wait.
func udpAsk(t *testing.T, addr, msg string, wait time.Duration) string {
	t.Helper()
	c, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(wait))
	buf := make([]byte, 2048)
	n, err := c.Read(buf)
	if err != nil {
		return ""
	}
	return string(buf[:n])
}

// closedPort is a loopback port nothing listens on (TCP and UDP).
func closedPort(t *testing.T) string {
	t.Helper()
	_, port, _ := net.SplitHostPort(freeport.Addr(t))
	return port
}

func hostname(t *testing.T) string {
	t.Helper()
	name, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	return name
}

func exitCode(err error) (int, bool) {
	var code agnhostExit
	if errors.As(err, &code) {
		return int(code), true
	}
	return 0, false
}

func TestAgnhostDispatch(t *testing.T) {
	env, _, _ := testAgnhostEnv(t)
	err := env.run(context.Background(), []string{"nosuch"})
	if err == nil || !strings.Contains(err.Error(), `"nosuch"`) || !strings.Contains(err.Error(), "netexec, pause, porter") {
		t.Errorf("unknown subcommand: %v", err)
	}
	if err := env.run(context.Background(), []string{"netexec", "extra"}); err == nil || !strings.Contains(err.Error(), "accepts at most 0 arg(s), received 1") {
		t.Errorf("netexec with an argument: %v", err)
	}
	if err := env.run(context.Background(), []string{"netexec", "--nosuch"}); err == nil || strings.Contains(err.Error(), "exit status") {
		t.Errorf("netexec with an unknown flag: %v", err)
	}
	if err := env.run(context.Background(), []string{"netexec", "--help"}); err != agnhostExit(0) {
		t.Errorf("netexec --help: %v", err)
	}
	for _, name := range agnhostSubcommands {
		if agnhostCommands[name] == nil {
			t.Errorf("no subcommand %s", name)
		}
	}
}

func TestParseAgnhostFlags(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		wantPos    string
		wantTime   time.Duration
		wantProto  string
		wantErrSub string
	}{
		{args: []string{"1.2.3.4:80"}, wantPos: "1.2.3.4:80", wantProto: "tcp"},
		{args: []string{"1.2.3.4:80", "--timeout=3s", "--protocol=udp"}, wantPos: "1.2.3.4:80", wantTime: 3 * time.Second, wantProto: "udp"},
		{args: []string{"--timeout", "2s", "h:1", "--protocol", "sctp"}, wantPos: "h:1", wantTime: 2 * time.Second, wantProto: "sctp"},
		{args: []string{"-v=4", "--vmodule=x=2", "h:1"}, wantPos: "h:1", wantProto: "tcp"},
		{args: []string{"--time_out=1s", "h:1"}, wantErrSub: "time-out"},
		{args: []string{"--", "--timeout=1s"}, wantPos: "--timeout=1s", wantProto: "tcp"},
	} {
		fs := agnhostFlagSet(&agnhostEnv{stderr: io.Discard}, "connect")
		timeout := fs.Duration("timeout", 0, "")
		proto := fs.String("protocol", "tcp", "")
		pos, err := parseAgnhostFlags(fs, tc.args, -1)
		if tc.wantErrSub != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErrSub) {
				t.Errorf("%q: error %v, want one about %s", tc.args, err, tc.wantErrSub)
			}
			continue
		}
		if err != nil || strings.Join(pos, " ") != tc.wantPos || *timeout != tc.wantTime || *proto != tc.wantProto {
			t.Errorf("%q: %q %v %q %v", tc.args, pos, *timeout, *proto, err)
		}
	}
}

func TestUDPListenAddresses(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"10.0.0.2,10.0.0.1,10.0.0.2", "10.0.0.1 10.0.0.2"},
		{"010.000.000.001,fd00::1", "10.0.0.1 fd00::1"},
		{"10.0.0.1,nohost", "error"},
	} {
		got, err := udpListenAddresses(tc.in)
		s := strings.Join(got, " ")
		if err != nil {
			s = "error"
		}
		if s != tc.want {
			t.Errorf("udpListenAddresses(%q) = %q, want %q", tc.in, s, tc.want)
		}
	}
}

func TestNetexecHTTP(t *testing.T) {
	t.Setenv("AGNHOST_TEST_VAR", "forty two")
	env, _, _ := testAgnhostEnv(t)
	r := startAgnhost(t, env, 2, "netexec", "--http-port=0", "--udp-port=0")
	base := "http://" + r.addr(t, "http")
	peerEnv, _, _ := testAgnhostEnv(t)
	peer := startAgnhost(t, peerEnv, 2, "netexec", "--http-port", "0", "--udp-port", "0")
	name := hostname(t)
	refused := closedPort(t)
	dial := func(query string) string { return base + "/dial?host=127.0.0.1&" + query }

	for _, tc := range []struct {
		path     string
		header   http.Header
		wantCode int
		want     string // the exact body, unless check is set
		check    func(body string) bool
		wantHdr  map[string]string
	}{
		{path: "/", wantCode: 200, check: func(b string) bool { return strings.HasPrefix(b, "NOW: ") }},
		{path: "/nosuch/path", wantCode: 200, check: func(b string) bool { return strings.HasPrefix(b, "NOW: ") }},
		{path: "/hostname", wantCode: 200, want: name},
		{path: "/hostName", wantCode: 200, want: name},
		{path: "/clientip", wantCode: 200, check: func(b string) bool { return strings.HasPrefix(b, "127.0.0.1:") && !strings.HasSuffix(b, "\n") }},
		{path: "/serverport", wantCode: 200, want: "0"},
		{path: "/echo?msg=hello%20world", wantCode: 200, want: "hello world"},
		{path: "/echo?msg=gone&code=404", wantCode: 404, want: "gone"},
		{path: "/echo?msg=x&code=abc", wantCode: 200, want: "argument 'code' must be an integer or empty, got \"abc\"\n"},
		{path: "/header?key=X-Test", header: http.Header{"X-Test": {"v1"}}, wantCode: 200, want: "v1"},
		{path: "/header", header: http.Header{"X-Test": {"v1"}}, wantCode: 200, check: func(b string) bool {
			var h map[string][]string
			return json.Unmarshal([]byte(b), &h) == nil && h["X-Test"][0] == "v1"
		}},
		{path: "/healthz", wantCode: 200, want: ""},
		{path: "/readyz", wantCode: 200, want: "ok"},
		{path: "/envvar?var=AGNHOST_TEST_VAR", wantCode: 200, want: "forty two"},
		{path: "/envvar", wantCode: 400, want: "'var' query parameter is required\n"},
		{path: "/envvar?var=AGNHOST_TEST_UNSET", wantCode: 500, want: "env var \"AGNHOST_TEST_UNSET\" is not set\n"},
		{path: "/redirect?location=/echo%3Fmsg%3Dfoobar&code=307", wantCode: 307, check: func(string) bool { return true },
			wantHdr: map[string]string{"Location": "/echo?msg=foobar"}},
		{path: "/redirect?location=/x", wantCode: 302, check: func(string) bool { return true }, wantHdr: map[string]string{"Location": "/x"}},
		{path: "/redirect?location=/x&code=y", wantCode: 200, want: "argument 'code' must be an integer or empty, got \"y\"\n"},
		{path: "/shell?cmd=echo%20hi", wantCode: 200, want: `{"output":"hi\n"}`},
		{path: "/shell?shellCommand=echo%20out%3B%20exit%203", wantCode: 200, want: `{"error":"exit status 3","output":"out\n"}`},
		{path: "/shell?cmd=exit%201", wantCode: 200, want: `{"error":"exit status 1"}`},
		{path: "/shell", wantCode: 200, want: `{}`},
		{path: "/exit?code=abc", wantCode: 200, want: "argument 'code' must be an integer [0-127] or empty, got \"abc\"\n"},
		{path: "/exit?timeout=soon", wantCode: 200, want: "argument 'timeout' must be a valid golang duration or empty, got \"soon\"\n"},
		{path: "/exit?wait=x", wantCode: 200, want: "argument 'wait' must be a valid golang duration or empty, got \"x\"\n"},

		{path: "/dial?request=hostName&protocol=http&host=127.0.0.1&port=" + peer.port(t, "http") + "&tries=1", wantCode: 200,
			want: `{"responses":["` + name + `"]}`},
		{path: "/dial?request=hostName&host=127.0.0.1&port=" + peer.port(t, "http") + "&tries=2", wantCode: 200,
			want: `{"responses":["` + name + `","` + name + `"]}`},
		{path: dial("request=echo?msg=a%2526b&port=" + peer.port(t, "http")), wantCode: 200, want: `{"responses":["a\u0026b"]}`},
		{path: dial("request=hostname&protocol=udp&port=" + peer.port(t, "udp")), wantCode: 200, want: `{"responses":["` + name + `"]}`},
		{path: dial("request=echo%20HeLLo&protocol=UDP&port=" + peer.port(t, "udp")), wantCode: 200, want: `{"responses":["hello"]}`},
		{path: dial("request=envvar%20AGNHOST_TEST_VAR&protocol=udp&port=" + peer.port(t, "udp")), wantCode: 200, want: `{"responses":["forty two"]}`},
		{path: dial("request=serverport&protocol=udp&port=" + peer.port(t, "udp")), wantCode: 200, want: `{"responses":["0"]}`},
		{path: dial("request=hostName&port=" + refused), wantCode: 200,
			want: `{"errors":["Get \"http://127.0.0.1:` + refused + `/hostName\": dial tcp 127.0.0.1:` + refused + `: connect: connection refused"]}`},
		{path: dial("request=hostName&protocol=sctp&port=" + refused), wantCode: 200,
			want: `{"errors":["sctp dial failed. err:SCTP is not supported by svcnet's agnhost"]}`},
		{path: dial("request=hostName&tries=0&port=" + refused), wantCode: 200, want: `{}`},
		{path: dial("port=80"), wantCode: 400, want: "request parameter not specified. <nil>\n"},
		{path: dial("request=x&port=80&tries=many"), wantCode: 400, want: "tries parameter is invalid. strconv.Atoi: parsing \"many\": invalid syntax\n"},
		{path: dial("request=x&port=80&protocol=icmp"), wantCode: 400, want: "unsupported protocol. icmp\n"},
		{path: dial("request=x&port=http0"), wantCode: 400, check: func(b string) bool { return strings.HasPrefix(b, "host and/or port param are invalid. ") }},
	} {
		code, hdr, body := httpDo(t, http.MethodGet, base+strings.TrimPrefix(tc.path, base), nil, tc.header)
		ok := code == tc.wantCode
		if tc.check != nil {
			ok = ok && tc.check(body)
		} else {
			ok = ok && body == tc.want
		}
		for k, v := range tc.wantHdr {
			ok = ok && hdr.Get(k) == v
		}
		if !ok {
			t.Errorf("GET %s = %d %q (headers %v), want %d %q", tc.path, code, body, hdr, tc.wantCode, tc.want)
		}
	}
}

func TestNetexecDialUDPTimeout(t *testing.T) {
	env, _, _ := testAgnhostEnv(t)
	r := startAgnhost(t, env, 2, "netexec", "--http-port=0", "--udp-port=0")
	// A UDP socket that never answers: the try fails after dialTimeout.
	silent, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	_, port, _ := net.SplitHostPort(silent.LocalAddr().String())
	code, body := httpGet(t, "http://"+r.addr(t, "http")+"/dial?request=hostname&protocol=udp&host=127.0.0.1&port="+port)
	if code != 200 || !strings.HasPrefix(body, `{"errors":["reading from udp connection failed. err:'read udp 127.0.0.1:`) || !strings.HasSuffix(body, `i/o timeout'"]}`) {
		t.Errorf("dial to a silent UDP port = %d %q", code, body)
	}
}

func TestNetexecUDP(t *testing.T) {
	t.Setenv("AGNHOST_TEST_VAR", "Mixed Case")
	env, _, _ := testAgnhostEnv(t)
	r := startAgnhost(t, env, 2, "netexec", "--http-port=0", "--udp-port=0")
	udp := r.addr(t, "udp")
	for _, tc := range []struct{ send, want string }{
		{"hostname", hostname(t)},
		{"  HostName\n", hostname(t)},
		{"echo Hello There\n", "hello there"},
		{"envvar AGNHOST_TEST_VAR", "Mixed Case"},
		{"serverport", "0"},
		{"nonsense", ""},
		{"", ""},
	} {
		wait := 2 * time.Second
		if tc.want == "" {
			wait = 200 * time.Millisecond
		}
		if got := udpAsk(t, udp, tc.send, wait); got != tc.want {
			t.Errorf("UDP %q = %q, want %q", tc.send, got, tc.want)
		}
	}
	c, err := net.Dial("udp", udp)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("clientip"))
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 100)
	n, _ := c.Read(buf)
	if got := string(buf[:n]); got != c.LocalAddr().String() {
		t.Errorf("UDP clientip = %q, want %q", got, c.LocalAddr())
	}
}

func TestNetexecOptions(t *testing.T) {
	t.Run("udp-port=-1 is never ready", func(t *testing.T) {
		env, _, _ := testAgnhostEnv(t)
		r := startAgnhost(t, env, 1, "netexec", "--http-port=0", "--udp-port", "-1")
		for _, path := range []string{"/healthz", "/readyz"} {
			if code, body := httpGet(t, "http://"+r.addr(t, "http")+path); code != 412 || body != "" {
				t.Errorf("%s = %d %q, want 412", path, code, body)
			}
		}
	})
	t.Run("http-override", func(t *testing.T) {
		env, _, _ := testAgnhostEnv(t)
		r := startAgnhost(t, env, 2, "netexec", "--http-port=0", "--udp-port=0", "--http-override=/echo?msg=overridden")
		for _, path := range []string{"/", "/hostname", "/dial?request=x"} {
			if code, body := httpGet(t, "http://"+r.addr(t, "http")+path); code != 200 || body != "overridden" {
				t.Errorf("%s = %d %q, want the override's answer", path, code, body)
			}
		}
	})
	t.Run("udp-listen-addresses", func(t *testing.T) {
		env, _, _ := testAgnhostEnv(t)
		env.bindHost = ""
		r := startAgnhost(t, env, 2, "netexec", "--http-port=0", "--udp-port=0", "--udp-listen-addresses=127.0.0.1,127.0.0.1")
		if n := len(r.addrs["udp"]); n != 1 {
			t.Errorf("%d UDP servers, want 1: %v", n, r.addrs)
		}
		if got := udpAsk(t, r.addr(t, "udp"), "echo x", 2*time.Second); got != "x" {
			t.Errorf("UDP echo on 127.0.0.1 = %q", got)
		}
	})
	t.Run("sctp-port", func(t *testing.T) {
		env, _, _ := testAgnhostEnv(t)
		if err := env.run(context.Background(), []string{"netexec", "--http-port=0", "--udp-port=-1", "--sctp-port=0"}); !errors.Is(err, errSCTP) {
			t.Errorf("netexec --sctp-port: %v", err)
		}
	})
	t.Run("tls", func(t *testing.T) {
		cert, err := localhostCertificate()
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		key, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
		if err != nil {
			t.Fatal(err)
		}
		certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
		os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}), 0o600)
		os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}), 0o600)
		env, _, _ := testAgnhostEnv(t)
		r := startAgnhost(t, env, 1, "netexec", "--http-port=0", "--udp-port=-1", "--tls-cert-file="+certFile, "--tls-private-key-file", keyFile)
		if code, body := httpGet(t, "https://"+r.addr(t, "http")+"/echo?msg=secure"); code != 200 || body != "secure" {
			t.Errorf("HTTPS /echo = %d %q", code, body)
		}
	})
	t.Run("upload", func(t *testing.T) {
		env, _, _ := testAgnhostEnv(t)
		r := startAgnhost(t, env, 1, "netexec", "--http-port=0", "--udp-port=-1")
		var body bytes.Buffer
		mw := multipart.NewWriter(&body)
		fw, _ := mw.CreateFormFile("file", "data.txt")
		fw.Write([]byte("uploaded bytes"))
		mw.Close()
		code, _, resp := httpDo(t, http.MethodPost, "http://"+r.addr(t, "http")+"/upload", &body, http.Header{"Content-Type": {mw.FormDataContentType()}})
		var out map[string]string
		if code != 201 || json.Unmarshal([]byte(resp), &out) != nil || filepath.Dir(out["output"]) != env.uploadDir {
			t.Fatalf("POST /upload = %d %q", code, resp)
		}
		if b, _ := os.ReadFile(out["output"]); string(b) != "uploaded bytes" {
			t.Errorf("uploaded file holds %q", b)
		}
		if code, _, resp := httpDo(t, http.MethodPost, "http://"+r.addr(t, "http")+"/upload", nil, nil); code != 200 || resp != `{"error":"Unable to upload file."}` {
			t.Errorf("POST /upload without a file = %d %q", code, resp)
		}
	})
}

func TestNetexecExit(t *testing.T) {
	for _, tc := range []struct {
		path string
		want int
	}{
		{"/exit?code=3", 3},
		{"/exit?code=4&timeout=1s", 4},
		{"/exit", 0},
		{"/shutdown", 0},
	} {
		env, _, _ := testAgnhostEnv(t)
		r := startAgnhost(t, env, 1, "netexec", "--http-port=0", "--udp-port=-1")
		resp, err := testHTTPClient.Get("http://" + r.addr(t, "http") + tc.path)
		if err == nil {
			resp.Body.Close()
		}
		if code, ok := exitCode(r.wait(t)); !ok || code != tc.want {
			t.Errorf("%s: exit %d (%v), want %d", tc.path, code, ok, tc.want)
		}
	}
}

func TestNetexecDelayShutdown(t *testing.T) {
	env, _, _ := testAgnhostEnv(t)
	r := startAgnhost(t, env, 2, "netexec", "--http-port=0", "--udp-port=0", "--delay-shutdown=1")
	base := "http://" + r.addr(t, "http")
	start := time.Now()
	r.cancel() // SIGTERM
	time.Sleep(50 * time.Millisecond)
	if code, body := httpGet(t, base+"/readyz"); code != 503 || body != "shutting down" {
		t.Errorf("/readyz after SIGTERM = %d %q", code, body)
	}
	if code, _ := httpGet(t, base+"/healthz"); code != 200 {
		t.Errorf("/healthz after SIGTERM = %d", code)
	}
	if code, ok := exitCode(r.wait(t)); !ok || code != 0 {
		t.Errorf("netexec ended with %d %v", code, ok)
	}
	if d := time.Since(start); d < 900*time.Millisecond {
		t.Errorf("netexec ended %v after SIGTERM, want 1 s", d)
	}
	if _, err := net.DialTimeout("tcp", r.addr(t, "http"), time.Second); err == nil {
		t.Error("netexec still listens")
	}
}

func TestServeHostname(t *testing.T) {
	name := hostname(t)
	t.Run("http", func(t *testing.T) {
		env, _, _ := testAgnhostEnv(t)
		env.linger = 300 * time.Millisecond
		r := startAgnhost(t, env, 1, "serve-hostname", "--port=0")
		url := "http://" + r.addr(t, "http") + "/anything"
		if code, body := httpGet(t, url); code != 200 || body != name {
			t.Errorf("GET = %d %q, want %q", code, body, name)
		}
		r.cancel()
		// Still serving until the pod is gone.
		if code, body := httpGet(t, url); code != 200 || body != name {
			t.Errorf("GET after SIGTERM = %d %q", code, body)
		}
		if err := r.wait(t); err != nil {
			t.Error(err)
		}
	})
	t.Run("close", func(t *testing.T) {
		env, _, _ := testAgnhostEnv(t)
		r := startAgnhost(t, env, 1, "serve-hostname", "--port", "0", "--close")
		resp, err := testHTTPClient.Get("http://" + r.addr(t, "http"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if !resp.Close {
			t.Error("no Connection: close")
		}
	})
	t.Run("tcp and udp", func(t *testing.T) {
		env, _, _ := testAgnhostEnv(t)
		r := startAgnhost(t, env, 2, "serve-hostname", "--http=false", "--tcp", "--udp", "--port=0")
		c, err := net.DialTimeout("tcp", r.addr(t, "tcp"), 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(2 * time.Second))
		b, err := io.ReadAll(c)
		c.Close()
		if err != nil || string(b) != name {
			t.Errorf("TCP = %q %v, want %q", b, err, name)
		}
		if got := udpAsk(t, r.addr(t, "udp"), "hostName\n", 2*time.Second); got != name {
			t.Errorf("UDP = %q, want %q", got, name)
		}
	})
	t.Run("http with tcp", func(t *testing.T) {
		env, _, _ := testAgnhostEnv(t)
		if err := env.run(context.Background(), []string{"serve-hostname", "--tcp", "--port=0"}); err == nil {
			t.Error("serve-hostname --tcp with --http ran")
		}
	})
}

func TestPorter(t *testing.T) {
	t.Setenv("SERVE_PORT_0", "foo")
	t.Setenv("SERVE_TCP_PORT_00", `<a href="/rewriteme">test</a>`)
	t.Setenv("SERVE_TLS_PORT_0", "tls baz")
	t.Setenv("SERVE_UDP_PORT_0", "udp qux")
	cert, err := localhostCertificate()
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(cert.Leaf)
	verifying := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}

	env, _, _ := testAgnhostEnv(t)
	r := startAgnhost(t, env, 4, "porter")
	for _, tc := range []struct{ url, want string }{
		{"http://" + r.addr(t, "SERVE_PORT_0") + "/", "foo"},
		{"http://" + r.addr(t, "SERVE_PORT_0") + "/some/path?q=1", "foo"},
		{"http://" + r.addr(t, "SERVE_TCP_PORT_00") + "/", `<a href="/rewriteme">test</a>`},
		{"https://" + r.addr(t, "SERVE_TLS_PORT_0") + "/", "tls baz"},
	} {
		if code, body := httpGet(t, tc.url); code != 200 || body != tc.want {
			t.Errorf("GET %s = %d %q, want %q", tc.url, code, body, tc.want)
		}
	}
	resp, err := verifying.Get("https://localhost:" + r.port(t, "SERVE_TLS_PORT_0"))
	if err != nil {
		t.Errorf("the certificate does not verify for localhost: %v", err)
	} else {
		resp.Body.Close()
	}
	if got := udpAsk(t, r.addr(t, "SERVE_UDP_PORT_0"), "hostname\n", 2*time.Second); got != "udp qux" {
		t.Errorf("UDP = %q", got)
	}

	jsonEnv, _, _ := testAgnhostEnv(t)
	j := startAgnhost(t, jsonEnv, 4, "porter", "--json-response")
	for _, method := range []string{"GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD"} {
		code, hdr, body := httpDo(t, method, "http://"+j.addr(t, "SERVE_PORT_0")+"/some/path/with/"+method, nil, nil)
		want := `{"Method":"` + method + `","Body":"foo"}`
		if method == "HEAD" {
			want = ""
		}
		if code != 200 || body != want || hdr.Get("Content-Type") != "application/json" {
			t.Errorf("%s = %d %q %q, want %q", method, code, body, hdr.Get("Content-Type"), want)
		}
	}

	t.Run("sctp", func(t *testing.T) {
		t.Setenv("SERVE_SCTP_PORT_0", "x")
		env, _, _ := testAgnhostEnv(t)
		if err := env.run(context.Background(), []string{"porter"}); !errors.Is(err, errSCTP) {
			t.Errorf("porter with SCTP: %v", err)
		}
	})
}

// fullBacklog is a loopback TCP port whose listener accepts nothing and
// whose queue is full: connections to it time out.
func fullBacklog(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
	for range 8 {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return addr
			}
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
	}
	t.Skip("could not fill a listen queue on this machine")
	return ""
}

func TestConnect(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	answering, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer answering.Close()
	go func() {
		buf := make([]byte, 100)
		for {
			n, from, err := answering.ReadFrom(buf)
			if err != nil {
				return
			}
			answering.WriteTo(buf[:n], from)
		}
	}()
	silent, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	refused := "127.0.0.1:" + closedPort(t)

	for _, tc := range []struct {
		name string
		args []string
		want string // stderr; "" for success
		// prefix: stderr need only start with want
		prefix bool
	}{
		{name: "tcp open", args: []string{l.Addr().String()}},
		{name: "tcp open, flags after", args: []string{l.Addr().String(), "--timeout=3s", "--protocol=tcp"}},
		{name: "tcp refused", args: []string{"--timeout=3s", refused}, want: "REFUSED\n"},
		{name: "tcp timeout", args: []string{"--timeout=300ms", "FULL"}, want: "TIMEOUT\n"},
		{name: "no port", args: []string{"127.0.0.1"}, want: "UNKNOWN: address 127.0.0.1: missing port in address\n"},
		{name: "udp answered", args: []string{answering.LocalAddr().String(), "--timeout=2s", "--protocol=udp"}},
		{name: "udp refused", args: []string{refused, "--timeout=2s", "--protocol=udp"}, want: "REFUSED: ", prefix: true},
		{name: "udp timeout", args: []string{silent.LocalAddr().String(), "--timeout=200ms", "--protocol=udp"}, want: "TIMEOUT: ", prefix: true},
		{name: "sctp", args: []string{refused, "--protocol=sctp"}, want: "OTHER: SCTP is not supported by svcnet's agnhost\n"},
		{name: "bad protocol", args: []string{refused, "--protocol=icmp"}, want: "Unsupported protocol\nicmp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			for i, a := range args {
				if a == "FULL" {
					args = append([]string{}, args...)
					args[i] = fullBacklog(t)
				}
			}
			env, _, stderr := testAgnhostEnv(t)
			err := env.run(context.Background(), append([]string{"connect"}, args...))
			got := stderr.String()
			if tc.want == "" {
				if err != nil || got != "" {
					t.Errorf("connect %q: %v, stderr %q", args, err, got)
				}
				return
			}
			code, ok := exitCode(err)
			match := got == tc.want || tc.prefix && strings.HasPrefix(got, tc.want) && strings.HasSuffix(got, "\n")
			if !ok || code != 1 || !match {
				t.Errorf("connect %q: %v, stderr %q, want exit 1 and %q", args, err, got, tc.want)
			}
		})
	}
	env, _, _ := testAgnhostEnv(t)
	if err := env.run(context.Background(), []string{"connect"}); err == nil || strings.Contains(err.Error(), "exit status") {
		t.Errorf("connect without a destination: %v", err)
	}
}

func TestAgnhostDNS(t *testing.T) {
	env, stdout, _ := testAgnhostEnv(t)
	os.WriteFile(env.resolvConf, []byte("# written by the node\nnameserver 10.96.0.10\nnameserver 1.1.1.1\nsearch ns.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n"), 0o644)
	hosts := "127.0.0.1\tlocalhost\n10.244.1.5\tpod-a\n"
	os.WriteFile(env.etcHosts, []byte(hosts), 0o644)
	for _, tc := range []struct{ cmd, want string }{
		{"dns-suffix", "ns.svc.cluster.local,svc.cluster.local,cluster.local\n"},
		{"dns-server-list", "10.96.0.10\n"},
		{"etc-hosts", hosts + "\n"},
	} {
		err := env.run(context.Background(), []string{tc.cmd})
		if got := stdout.String(); err != nil || got != tc.want {
			t.Errorf("%s = %q, %v; want %q", tc.cmd, got, err, tc.want)
		}
		stdout.Reset()
	}
	os.WriteFile(env.resolvConf, []byte("nameserver 10.96.0.10\n"), 0o644)
	if err := env.run(context.Background(), []string{"dns-suffix"}); err == nil {
		t.Error("dns-suffix without a search line succeeded")
	}
}

func TestAgnhostPause(t *testing.T) {
	msgFile := filepath.Join(t.TempDir(), "termination-log")
	t.Setenv("TERMINATION_MESSAGE_PATH", msgFile)
	env, stdout, _ := testAgnhostEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- env.run(ctx, nil) }() // no arguments: the image's default, pause
	time.Sleep(20 * time.Millisecond)
	cancel()
	err := <-done
	want := "exiting because of signal \"terminated\"\n"
	if code, ok := exitCode(err); !ok || code != 2 || stdout.String() != "Paused\nSignals registered\n"+want {
		t.Errorf("pause: %v, output %q", err, stdout.String())
	}
	if b, _ := os.ReadFile(msgFile); string(b) != want {
		t.Errorf("termination message %q", b)
	}
}

func TestAgnhostEntrypointTester(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"entrypoint-tester", "override", "arguments"}, "[/agnhost entrypoint-tester override arguments]\n"},
		{[]string{"/agnhost-2", "entrypoint-tester"}, "[/agnhost-2 entrypoint-tester]\n"},
	} {
		env, stdout, _ := testAgnhostEnv(t)
		if err := env.run(context.Background(), tc.args); err != nil || stdout.String() != tc.want {
			t.Errorf("%q: %q %v, want %q", tc.args, stdout.String(), err, tc.want)
		}
	}
}

func TestAgnhostTestWebserver(t *testing.T) {
	env, _, _ := testAgnhostEnv(t)
	os.MkdirAll(filepath.Join(env.webRoot, "results"), 0o755)
	os.WriteFile(filepath.Join(env.webRoot, "results", "wheezy_udp@kubernetes.default"), []byte("OK\n"), 0o644)
	r := startAgnhost(t, env, 1, "test-webserver", "--port=0")
	code, hdr, body := httpDo(t, http.MethodGet, "http://"+r.addr(t, "http")+"/results/wheezy_udp@kubernetes.default", nil,
		http.Header{"If-Modified-Since": {time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)}})
	if code != 200 || body != "OK\n" || hdr.Get("Access-Control-Allow-Origin") != "*" || hdr.Get("Cache-Control") != "private" {
		t.Errorf("GET a file = %d %q %v", code, body, hdr)
	}
	if code, _ := httpGet(t, "http://"+r.addr(t, "http")+"/results/missing"); code != 404 {
		t.Errorf("GET a missing file = %d", code)
	}
}

func TestAgnhostLiveness(t *testing.T) {
	for _, tc := range []struct {
		healthy  time.Duration
		path     string
		wantCode int
		want     string
	}{
		{time.Hour, "/healthz", 200, "ok"},
		{0, "/healthz", 500, "error: "},
		{time.Hour, "/started", 200, ""},
		{time.Hour, "/redirect?loc=%2Fhealthz", 302, ""},
	} {
		srv := &http.Server{Handler: livenessHandler(time.Now(), tc.healthy)}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go srv.Serve(l)
		code, hdr, body := httpDo(t, http.MethodGet, "http://"+l.Addr().String()+tc.path, nil, nil)
		srv.Close()
		if code != tc.wantCode || !strings.HasPrefix(body, tc.want) || tc.wantCode == 302 && hdr.Get("Location") != "/healthz" {
			t.Errorf("%s (healthy for %v) = %d %q", tc.path, tc.healthy, code, body)
		}
	}
}
