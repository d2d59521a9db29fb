package h1

import (
	"bufio"
	"bytes"
	"net/http"
	"strings"
	"testing"
)

func TestParseRequest(t *testing.T) {
	tests := []struct {
		name   string
		head   string
		n      int // -1: the whole head
		ok     bool
		fields string // Name=Value, comma-separated
		close  bool
		id     string
	}{
		{name: "minimal", head: "GET / HTTP/1.1\r\nHost: a\r\n\r\n", n: -1, ok: true},
		{name: "fields kept in order", head: "GET /x?y HTTP/1.1\r\nAccept: */*\r\nHost: a\r\nX-A:  1 \r\nX-A: 2\r\n\r\n", n: -1, ok: true, fields: "Accept=*/*,X-A=1,X-A=2"},
		{name: "forwarded fields dropped", head: "GET / HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: 1\r\nx-real-ip: 2\r\nForwarded: 3\r\nX-Forwarded-Port: 4\r\nKeep-Alive: 5\r\n\r\n", n: -1, ok: true},
		{name: "close", head: "GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, Close\r\n\r\n", n: -1, ok: true, close: true},
		{name: "request id", head: "GET / HTTP/1.1\r\nHost: a\r\nX-Request-Id: \r\nX-Request-ID: r1\r\n\r\n", n: -1, ok: true, fields: "X-Request-ID=r1", id: "r1"},
		{name: "content-length 0", head: "DELETE / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n", n: -1, ok: true, fields: "Content-Length=0"},
		{name: "followed by the next request", head: "GET / HTTP/1.1\r\nHost: a\r\n\r\nGET /next", n: 27, ok: true},
		{name: "incomplete line", head: "GET / HTTP/1.1\r\nHo", n: 0, ok: true},
		{name: "incomplete head", head: "GET / HTTP/1.1\r\nHost: a\r\n", n: 0, ok: true},

		{name: "body", head: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\n", n: 0},
		{name: "chunked", head: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", n: 0},
		{name: "upgrade", head: "GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n\r\n", n: 0},
		{name: "expect", head: "GET / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n\r\n", n: 0},
		{name: "te", head: "GET / HTTP/1.1\r\nHost: a\r\nTE: trailers\r\n\r\n", n: 0},
		{name: "connection naming a field", head: "GET / HTTP/1.1\r\nHost: a\r\nConnection: X-A\r\n\r\n", n: 0},
		{name: "HTTP/1.0", head: "GET / HTTP/1.0\r\nHost: a\r\n\r\n", n: 0},
		{name: "HTTP/2 preface", head: "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", n: 0},
		{name: "percent", head: "GET /%41 HTTP/1.1\r\nHost: a\r\n\r\n", n: 0},
		{name: "absolute", head: "GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n", n: 0},
		{name: "fragment", head: "GET /#x HTTP/1.1\r\nHost: a\r\n\r\n", n: 0},
		{name: "no host", head: "GET / HTTP/1.1\r\n\r\n", n: 0},
		{name: "two hosts", head: "GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", n: 0},
		{name: "host with a space", head: "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", n: 0},
		{name: "bare LF", head: "GET / HTTP/1.1\nHost: a\n\n", n: 0},
		{name: "folding", head: "GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\n 2\r\n\r\n", n: 0},
		{name: "space before the colon", head: "GET / HTTP/1.1\r\nHost : a\r\n\r\n", n: 0},
		{name: "control byte", head: "GET / HTTP/1.1\r\nHost: a\r\nX: a\x01b\r\n\r\n", n: 0},
		{name: "non-ASCII value", head: "GET / HTTP/1.1\r\nHost: a\r\nX: \xc3\xa9\r\n\r\n", n: 0},
		{name: "double space", head: "GET  / HTTP/1.1\r\nHost: a\r\n\r\n", n: 0},
		{name: "lower-case method token is still a token", head: "get / HTTP/1.1\r\nHost: a\r\n\r\n", n: -1, ok: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r Request
			n, ok := ParseRequest([]byte(tt.head), &r)
			want := tt.n
			if want < 0 {
				want = len(tt.head)
			}
			if n != want || ok != tt.ok {
				t.Fatalf("n=%d ok=%v, want n=%d ok=%v", n, ok, want, tt.ok)
			}
			if n == 0 {
				return
			}
			var fields []string
			for _, f := range r.Fields {
				fields = append(fields, string(f.Name)+"="+string(f.Value))
			}
			if got := strings.Join(fields, ","); got != tt.fields {
				t.Errorf("fields %q, want %q", got, tt.fields)
			}
			if r.Close != tt.close || string(r.RequestID) != tt.id {
				t.Errorf("close %v id %q, want %v %q", r.Close, r.RequestID, tt.close, tt.id)
			}
		})
	}
}

func TestParseResponse(t *testing.T) {
	tests := []struct {
		name    string
		head    string
		ok      bool
		status  int
		length  int64
		chunked bool
		close   bool
		fields  string
	}{
		{name: "length", head: "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\n", ok: true, status: 200, length: 5, fields: "Content-Type"},
		{name: "chunked beats length", head: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", ok: true, status: 200, length: -1, chunked: true},
		{name: "until close", head: "HTTP/1.1 200 OK\r\n\r\n", ok: true, status: 200, length: -1},
		{name: "HTTP/1.0 closes", head: "HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n", ok: true, status: 200, length: 1, close: true},
		{name: "HTTP/1.0 keep-alive", head: "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\n", ok: true, status: 200, length: 1},
		{name: "close", head: "HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", ok: true, status: 404, length: 0, close: true},
		{name: "hop-by-hop dropped", head: "HTTP/1.1 200 OK\r\nConnection: X-Secret\r\nX-Secret: 1\r\nKeep-Alive: 5\r\nTrailer: X\r\nUpgrade: h2c\r\nX-Kept: 1\r\nContent-Length: 0\r\n\r\n", ok: true, status: 200, length: 0, fields: "X-Kept"},
		{name: "no reason", head: "HTTP/1.1 204\r\n\r\n", ok: true, status: 204, length: -1},
		{name: "same length twice", head: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n", ok: true, status: 200, length: 2},

		{name: "lengths differ", head: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n"},
		{name: "gzip coding", head: "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"},
		{name: "bad length", head: "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n"},
		{name: "not HTTP", head: "SSH-2.0-OpenSSH\r\n\r\n"},
		{name: "status out of range", head: "HTTP/1.1 099 Low\r\n\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r Response
			n, ok := ParseResponse([]byte(tt.head), &r)
			if ok != tt.ok || (ok && n != len(tt.head)) {
				t.Fatalf("n=%d ok=%v, want n=%d ok=%v", n, ok, len(tt.head), tt.ok)
			}
			if !ok {
				return
			}
			var names []string
			for _, f := range r.Fields {
				names = append(names, string(f.Name))
			}
			if r.Status != tt.status || r.ContentLength != tt.length || r.Chunked != tt.chunked || r.Close != tt.close || strings.Join(names, ",") != tt.fields {
				t.Errorf("got status %d length %d chunked %v close %v fields %v", r.Status, r.ContentLength, r.Chunked, r.Close, names)
			}
		})
	}
}

// FuzzParseRequest checks that a head the engine takes is one net/http
// takes too, with the same method, target and host: the engine never
// serves what net/http would refuse.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET /a/b?c=d HTTP/1.1\r\nHost: example.com:80\r\nAccept: */*\r\nConnection: close\r\n\r\n",
		"HEAD /x HTTP/1.1\r\nHost: [::1]:8080\r\nX-Request-ID: 1\r\nContent-Length: 0\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Request
		n, ok := ParseRequest(b, &r)
		if !ok || n == 0 {
			return
		}
		if n > len(b) {
			t.Fatalf("head length %d beyond the %d bytes", n, len(b))
		}
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(b[:n])))
		if err != nil {
			t.Fatalf("taken by the engine, refused by net/http: %v\n%q", err, b[:n])
		}
		if req.Method != string(r.Method) || req.RequestURI != string(r.Target) || req.Host != string(r.Host) {
			t.Fatalf("net/http reads %s %s host %q, the engine %s %s host %q", req.Method, req.RequestURI, req.Host, r.Method, r.Target, r.Host)
		}
		if req.ContentLength > 0 || len(req.TransferEncoding) > 0 {
			t.Fatalf("a request with a body taken: %q", b[:n])
		}
		if req.Close != r.Close {
			t.Fatalf("close: net/http %v, the engine %v", req.Close, r.Close)
		}
	})
}

// FuzzParseResponse checks the reader never panics and its framing
// agrees with net/http's on what both accept.
func FuzzParseResponse(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
		"HTTP/1.0 204 No Content\r\nConnection: keep-alive\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Response
		n, ok := ParseResponse(b, &r)
		if !ok || n == 0 {
			return
		}
		resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(b[:n])), &http.Request{Method: "GET"})
		if err != nil {
			// net/http is stricter in places (an empty field name, say):
			// such a head the engine passes on, as nginx would.
			return
		}
		if resp.Close != r.Close {
			t.Fatalf("close: net/http %v, the engine %v", resp.Close, r.Close)
		}
		if resp.StatusCode != r.Status {
			t.Fatalf("status: net/http %d, the engine %d", resp.StatusCode, r.Status)
		}
		if NoBody([]byte("GET"), r.Status) {
			return // framing fields mean nothing then
		}
		if r.Chunked != (len(resp.TransferEncoding) > 0) {
			t.Fatalf("chunked: net/http %v, the engine %v", resp.TransferEncoding, r.Chunked)
		}
		if !r.Chunked && resp.ContentLength != r.ContentLength {
			t.Fatalf("length: net/http %d, the engine %d", resp.ContentLength, r.ContentLength)
		}
	})
}
