package loadgen

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestRunCountsOutcomes(t *testing.T) {
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("pod-a\n")) }))
	defer ok.Close()
	unavailable := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(503) }))
	defer unavailable.Close()
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(2 * time.Second):
		}
	}))
	defer slow.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()
	var d net.Dialer
	cases := []struct {
		name, url string
		wantKind  string // "" for all ok
		// wantDetail begins every failure's detail.
		wantDetail string
	}{
		{"ok", ok.URL, "", ""},
		{"503", unavailable.URL, "status 503", ""},
		{"refused", closed, "refused", "connect +"},
		{"timeout", slow.URL, "timeout", "connect +"},
		{"silent dial", ok.URL, "timeout connecting", "connect not begun"},
		{"SYN dropped", "http://" + fullBacklog(t), "timeout connecting", "connect began +"},
	}
	// A dial that never completes, as when every SYN is lost.
	silent := func(ctx context.Context, _, _ string) (net.Conn, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	var targets []Target
	for _, tc := range cases {
		dial := d.DialContext
		if tc.name == "silent dial" {
			dial = silent
		}
		targets = append(targets, Target{Name: tc.name, URL: tc.url, Rate: 40, Timeout: 200 * time.Millisecond, Dial: dial})
	}
	// Run locks the client's memory first, which takes long under the race
	// detector's shadow memory: done before the window opens, not in it.
	lockOnce.Do(lockMemory)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	results := Run(ctx, targets...)
	for i, tc := range cases {
		r := results[i]
		if r.Sent < 5 {
			t.Errorf("%s: only %d sent", tc.name, r.Sent)
			continue
		}
		if tc.wantKind == "" {
			if r.OK != r.Sent || r.Answers["pod-a"] != r.OK {
				t.Errorf("%s: %s, answers %v", tc.name, r, r.Answers)
			}
			continue
		}
		if r.OK != 0 || r.Errors[tc.wantKind] != r.Sent || r.First.IsZero() {
			t.Errorf("%s: %s, want every request %q", tc.name, r, tc.wantKind)
		}
		for _, o := range r.failures {
			if !strings.HasPrefix(o.Detail, tc.wantDetail) {
				t.Errorf("%s: failure %s, want a detail beginning %q", tc.name, o, tc.wantDetail)
				break
			}
		}
	}
}

// fullBacklog returns a loopback address whose listener never accepts and
// whose accept queue is full: the kernel drops every further SYN there, so
// a connect to it begins and never ends.
func fullBacklog(t *testing.T) string {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", sa.(*unix.SockaddrInet4).Port)
	// Fill the queue (a backlog of 0 holds one connection).
	for range 2 {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err != nil {
			break
		}
		t.Cleanup(func() { c.Close() })
	}
	return addr
}

func TestEveryAndCount(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
	defer cancel()
	start := time.Now()
	var n atomic.Int32
	outcomes := Every(ctx, 50, 5, func() string {
		if n.Add(1)%3 == 0 {
			return "refused"
		}
		return ""
	})
	sent, failed, kinds := Count(outcomes, start, time.Now())
	if sent < 10 || sent != len(outcomes) || failed != sent/3 || kinds["refused"] != failed {
		t.Errorf("sent %d failed %d kinds %v of %d outcomes", sent, failed, kinds, len(outcomes))
	}
	if s, _, _ := Count(outcomes, start.Add(time.Hour), start.Add(2*time.Hour)); s != 0 {
		t.Errorf("a window after the run counted %d", s)
	}
}

// TestOverlapping: a stall is reported with a failure only when the two
// periods share time.
func TestOverlapping(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 16, 42, 1, 0, time.UTC)
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	failed := []Outcome{{At: t0, Took: ms(1000), Kind: "timeout"}}
	for _, tc := range []struct {
		name  string
		stall Stall
		want  bool
	}{
		{"inside", Stall{At: t0.Add(ms(200)), Len: ms(300)}, true},
		{"over the end", Stall{At: t0.Add(ms(900)), Len: ms(500)}, true},
		{"before", Stall{At: t0.Add(-ms(600)), Len: ms(500)}, false},
		{"after", Stall{At: t0.Add(ms(1000)), Len: ms(500)}, false},
	} {
		got := len(overlapping([]Stall{tc.stall}, failed)) == 1
		if got != tc.want {
			t.Errorf("%s: overlapping %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestCount: every failure in the window counts, by kind.
func TestCount(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 0, 19, 4, 0, time.UTC)
	sec := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }
	outcomes := []Outcome{
		{At: sec(0), Kind: "timeout"}, {At: sec(1)}, {At: sec(2), Kind: "refused"},
		{At: sec(3), Kind: "timeout"}, {At: sec(4)}, {At: sec(9), Kind: "timeout"},
	}
	sent, failed, kinds := Count(outcomes, sec(0), sec(9))
	if sent != 5 || failed != 3 || kinds["timeout"] != 2 || kinds["refused"] != 1 {
		t.Errorf("Count: sent %d failed %d %v, want 5 sent, 3 failed: 2 timeouts, 1 refused", sent, failed, kinds)
	}
}

// TestSlowAndConnectTimeout: a request that succeeds late is counted ok
// and listed slow, with where its time went; the connect timeout ends a
// connect that never completes long before the request's timeout.
func TestSlowAndConnectTimeout(t *testing.T) {
	late := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(SlowAfter + 100*time.Millisecond)
		_, _ = w.Write([]byte("pod-a\n"))
	}))
	defer late.Close()
	silent := func(ctx context.Context, _, _ string) (net.Conn, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	lockOnce.Do(lockMemory)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	results := Run(ctx,
		Target{Name: "late", URL: late.URL, Rate: 10},
		Target{Name: "silent", URL: late.URL, Rate: 10, ConnectTimeout: 100 * time.Millisecond, Dial: silent})
	r := results[0]
	if r.Sent == 0 || r.Failed() != 0 || len(r.Slow) != r.Sent || !strings.HasPrefix(r.Slow[0].Detail, "connect +") {
		t.Errorf("late: %s; want every request ok and slow, with its connect's times", r)
	}
	r = results[1]
	if r.Sent == 0 || r.Errors["timeout connecting"] != r.Sent {
		t.Fatalf("silent: %s; want every request to time out connecting", r)
	}
	for _, o := range r.failures {
		if o.Took > DefaultTimeout/2 {
			t.Errorf("silent: %s took %v: the connect timeout (100ms) did not end it", o, o.Took)
		}
	}
}

// TestLostWith: a request whose connection a server resets is lost with
// the server if it was sent before the server's end, and not if it was
// sent after; a refused one never is (no connection).
func TestLostWith(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.(*net.TCPConn).SetLinger(0)
			c.Close()
		}
	}()
	refused, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusedURL := "http://" + refused.Addr().String()
	refused.Close()
	lockOnce.Do(lockMemory)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	results := Run(ctx, Target{Name: "reset", URL: "http://" + l.Addr().String(), Rate: 40, Timeline: true},
		Target{Name: "refused", URL: refusedURL, Rate: 40, Timeline: true})
	for _, r := range results {
		if r.Sent < 5 || r.OK != 0 {
			t.Fatalf("%s: %s", r.Name, r)
		}
		for _, o := range r.Outcomes {
			switch r.Name {
			case "reset":
				if o.Kind != "reset" && o.Kind != "closed" || o.Connected.IsZero() || o.Connected.Before(o.At) {
					t.Fatalf("reset: %s connected at %v", o, o.Connected)
				}
				if !LostWith(o, o.Connected) || LostWith(o, o.At) {
					t.Errorf("reset: %s: lost with a server that ended when it connected: %v, when it was sent: %v",
						o, LostWith(o, o.Connected), LostWith(o, o.At))
				}
			case "refused":
				if o.Kind != "refused" || !o.Connected.IsZero() || LostWith(o, time.Now()) {
					t.Errorf("refused: %s connected at %v: never lost with a server", o, o.Connected)
				}
			}
		}
	}
}
