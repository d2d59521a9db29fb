package server

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/node/stats"
)

// FuzzWriteLogs: a container writes what it likes into its log, and
// `kubectl logs` options come from users. Serving any log with any
// options must not panic, must respect limitBytes, and must report an
// offset at a line's end for -f to go on from.
//
//	go test -run XXX -fuzz FuzzWriteLogs -fuzztime 60s ./internal/node/server
func FuzzWriteLogs(f *testing.F) {
	f.Add([]byte("2026-12-01T10:00:00.000000000Z stdout F hello\n2026-12-01T10:00:01.000000000Z stderr F world\n"), 1, -1, true, int64(0))
	f.Add([]byte("2026-12-01T10:00:00Z stdout P part\n2026-12-01T10:00:00Z stdout F ial\nnot a cri line\n\n"), -1, 5, false, int64(3600))
	f.Add([]byte("no newline at all"), 0, 0, false, int64(-5))
	f.Add([]byte("\x00\xff \xfe\n"), 1<<30, -7, true, int64(1<<40))
	f.Fuzz(func(t *testing.T, data []byte, tail, limit int, timestamps bool, sinceSeconds int64) {
		o := logOptions{timestamps: timestamps, tail: tail, limit: limit}
		if sinceSeconds != 0 {
			o.since = time.Now().Add(-time.Duration(sinceSeconds) * time.Second)
		}
		var out bytes.Buffer
		consumed, err := writeLogs(&out, bytes.NewReader(data), o)
		if err != nil {
			t.Fatal(err)
		}
		if consumed < 0 || consumed > int64(len(data)) || (consumed > 0 && data[consumed-1] != '\n') {
			t.Fatalf("offset %d is not a line end of %d bytes", consumed, len(data))
		}
		if limit >= 0 && out.Len() > limit {
			t.Fatalf("wrote %d bytes with limitBytes %d", out.Len(), limit)
		}
	})
}

// FuzzNodeRequests: any method, path and query, from the API server (a
// verified client certificate) or from anyone, answered without a panic:
// 401 to anyone but for /healthz, an error for pods the node does not run.
//
//	go test -run XXX -fuzz FuzzNodeRequests -fuzztime 60s ./internal/node/server
func FuzzNodeRequests(f *testing.F) {
	f.Add("GET", "/containerLogs/default/web/c?tailLines=10&follow=true", true)
	f.Add("POST", "/exec/default/web/c?command=sh&command=-c&input=1&output=1&tty=1", true)
	f.Add("GET", "/exec/kube-system/dns/..%2F..%2Fx?command=", true)
	f.Add("GET", "/containerLogs/a/b/..%2F..%2F..%2Flogs%2Fapiserver?previous=true&limitBytes=-1", true)
	f.Add("GET", "/healthz", false)
	f.Add("PUT", "/portForward/default/web", true)
	f.Add("GET", "/containerLogs/default/web/c", false)
	h := New(Config{NodeName: "node-1"}, noPods{}).Handler()
	apiServer := &x509.Certificate{Subject: pkix.Name{CommonName: KubeletClientUser}}
	f.Fuzz(func(t *testing.T, method, target string, verified bool) {
		if !strings.HasPrefix(target, "/") {
			target = "/" + target
		}
		req, err := http.NewRequest(method, "https://172.18.0.11:10250"+target, nil)
		if err != nil {
			return // not a request a server could be sent
		}
		req.TLS = &tls.ConnectionState{}
		if verified {
			req.TLS.VerifiedChains = [][]*x509.Certificate{{apiServer}}
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		code := rec.Code
		if !verified && req.URL.Path != "/healthz" && code != http.StatusUnauthorized {
			t.Fatalf("%s %s without credentials: %d", method, target, code)
		}
		// (A path that is not clean gets the mux's redirect to its
		// clean form, which serves nothing.)
		if req.URL.Path != "/healthz" && code < 300 {
			t.Fatalf("%s %s for a pod the node does not run: %d", method, target, code)
		}
	})
}

// noPods is a node that runs no pod.
type noPods struct{}

func (noPods) Pod(string, string) (Pod, bool) { return Pod{}, false }
func (noPods) LogActive(string) bool          { return false }
func (noPods) Stats() *stats.Summary          { return nil }
