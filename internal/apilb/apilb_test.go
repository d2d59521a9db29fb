package apilb

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestHealth(t *testing.T) {
	h := NewHealth([]string{"a", "b", "c"})
	if got := h.Pick(); len(got) != 0 {
		t.Fatalf("before any check: %v, want none", got)
	}
	for i := range 3 {
		h.Checked(i, true)
	}
	// Round robin over the ready ones, each pick listing the others as
	// fallbacks.
	steps := []struct {
		name string
		do   func()
		want []int
	}{
		{"all up", nil, []int{1, 2, 0}},
		{"all up, next", nil, []int{2, 0, 1}},
		{"one failed check keeps b", func() { h.Checked(1, false) }, []int{0, 1, 2}},
		{"two take it out", func() { h.Checked(1, false) }, []int{2, 0}},
		{"a refusal takes c out at once", func() { h.Refused(2) }, []int{0}},
		{"one good check brings c back", func() { h.Checked(2, true) }, []int{0, 2}},
	}
	for _, s := range steps {
		if s.do != nil {
			s.do()
		}
		if got := h.Pick(); !slices.Equal(got, s.want) {
			t.Errorf("%s: pick %v, want %v", s.name, got, s.want)
		}
	}
	if got := h.Up(); !slices.Equal(got, []string{"a", "c"}) {
		t.Errorf("up %v", got)
	}
}

// TestBalancer: two TLS servers behind the balancer on loopback; requests
// through it reach both; with one closed, every request still succeeds
// (refused connections retried on the other); one answering /readyz 500
// gets nothing.
func TestBalancer(t *testing.T) {
	var mu sync.Mutex
	hits := map[string]int{}
	newServer := func(name string, ready *atomic.Bool) *httptest.Server {
		s := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/readyz" {
				if !ready.Load() {
					http.Error(w, "not ready", http.StatusInternalServerError)
					return
				}
				fmt.Fprint(w, "ok")
				return
			}
			mu.Lock()
			hits[name]++
			mu.Unlock()
			fmt.Fprint(w, name)
		}))
		t.Cleanup(s.Close)
		return s
	}
	var readyA, readyB atomic.Bool
	readyA.Store(true)
	readyB.Store(true)
	a, b := newServer("a", &readyA), newServer("b", &readyB)
	pool := x509.NewCertPool()
	pool.AddCert(a.Certificate())
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	lb, err := New([]string{a.Listener.Addr().String(), b.Listener.Addr().String()}, &tls.Config{RootCAs: pool}, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = lb.Run(ctx, l) }()
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}}
	get := func() (string, error) {
		resp, err := hc.Get("https://" + l.Addr().String() + "/")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return string(body), err
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(lb.Ready()) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("backends never checked ready")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for range 10 {
		if _, err := get(); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	if hits["a"] == 0 || hits["b"] == 0 {
		t.Errorf("hits %v: want both backends used", hits)
	}
	mu.Unlock()
	// b not ready: after its failed checks, only a.
	readyB.Store(false)
	time.Sleep(200 * time.Millisecond)
	mu.Lock()
	clear(hits)
	mu.Unlock()
	for range 10 {
		if _, err := get(); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	if hits["b"] != 0 {
		t.Errorf("hits %v: an unready backend was used", hits)
	}
	mu.Unlock()
	// b ready again, a gone: every request still answered, by b.
	readyB.Store(true)
	time.Sleep(200 * time.Millisecond)
	a.Close()
	for i := range 10 {
		if got, err := get(); err != nil || got != "b" {
			t.Fatalf("request %d with a closed: %q, %v", i, got, err)
		}
	}
}
