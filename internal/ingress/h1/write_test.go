package h1

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestAppendRequest(t *testing.T) {
	var r Request
	head := "GET /a?b HTTP/1.1\r\nHost: app\r\nAccept: */*\r\nX-Forwarded-For: 6.6.6.6\r\nConnection: keep-alive\r\n\r\n"
	if n, ok := ParseRequest([]byte(head), &r); n != len(head) || !ok {
		t.Fatalf("ParseRequest: %d %v", n, ok)
	}
	got := string(AppendRequest(nil, &r, &Forwarded{For: "10.0.0.1", Proto: "http", Port: "80", RequestID: []byte("id1")}))
	want := "GET /a?b HTTP/1.1\r\nHost: app\r\nAccept: */*\r\nX-Forwarded-For: 10.0.0.1\r\nX-Forwarded-Host: app\r\n" +
		"X-Forwarded-Proto: http\r\nX-Forwarded-Port: 80\r\nX-Real-IP: 10.0.0.1\r\nX-Request-ID: id1\r\n\r\n"
	if got != want {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
	// The client's own ID is passed on among its fields, not made.
	head = "GET / HTTP/1.1\r\nHost: app\r\nX-Request-ID: given\r\n\r\n"
	ParseRequest([]byte(head), &r)
	if got := string(AppendRequest(nil, &r, &Forwarded{RequestID: []byte("made")})); strings.Count(got, "X-Request-ID") != 1 || !strings.Contains(got, "X-Request-ID: given") {
		t.Errorf("with the client's ID: %q", got)
	}
}

func TestAppendResponse(t *testing.T) {
	tests := []struct {
		name, head string
		noBody     bool
		close      bool
		want       string // after the status line
	}{
		{"length", "HTTP/1.1 200 OK\r\nA: 1\r\nContent-Length: 3\r\n\r\n", false, false, "A: 1\r\nContent-Length: 3\r\n\r\n"},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", false, false, "Transfer-Encoding: chunked\r\n\r\n"},
		{"until the pod closes", "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", false, true, "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"},
		{"a HEAD's length", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n", true, false, "Content-Length: 3\r\n\r\n"},
		{"a HEAD without length", "HTTP/1.1 200 OK\r\n\r\n", true, false, "\r\n"},
		{"204", "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n", true, false, "\r\n"},
	}
	for _, tt := range tests {
		var r Response
		if _, ok := ParseResponse([]byte(tt.head), &r); !ok {
			t.Fatalf("%s: ParseResponse declined", tt.name)
		}
		got := string(AppendResponse(nil, &r, tt.noBody, tt.close))
		_, rest, _ := strings.Cut(got, "\r\n")
		if rest != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, rest, tt.want)
		}
	}
}

// TestAppendError: the answer is net/http's Error's, field for field.
func TestAppendError(t *testing.T) {
	for _, head := range []bool{false, true} {
		rec := httptest.NewRecorder()
		http.Error(rec, "502 bad gateway", http.StatusBadGateway)
		want := rec.Result()
		got, err := http.ReadResponse(bufio.NewReader(strings.NewReader(string(AppendError(nil, 502, "502 bad gateway", head, true)))), &http.Request{Method: map[bool]string{true: "HEAD", false: "GET"}[head]})
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(got.Body)
		wantBody, _ := io.ReadAll(want.Body)
		if head {
			wantBody = nil
		}
		if got.StatusCode != 502 || string(body) != string(wantBody) || !got.Close ||
			got.Header.Get("Content-Type") != want.Header.Get("Content-Type") || got.Header.Get("X-Content-Type-Options") != "nosniff" ||
			got.ContentLength != int64(len("502 bad gateway\n")) {
			t.Errorf("head %v: %d %q %v %v, want net/http's %q", head, got.StatusCode, body, got.Header, got.ContentLength, wantBody)
		}
	}
}
