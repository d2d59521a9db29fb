// Package loadgen sends requests at a fixed rate and counts how each one
// ended: the client side of svcnet's "no request lost" measurements
// (rollouts, component faults). Every request is a new connection, so a
// request that lands on a dead or unready backend shows as an error
// instead of riding a kept-alive connection to a healthy one.
package loadgen

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Dialer opens a connection (from inside a network namespace, say).
type Dialer func(ctx context.Context, network, addr string) (net.Conn, error)

// Target is one path to measure: HTTP GETs of URL at Rate per second.
type Target struct {
	Name string
	URL  string
	Host string // the Host header, when not the URL's (an ingress's virtual host)
	Rate int
	// ConnectTimeout bounds a request's connect, Timeout the whole
	// request: defaults DefaultConnectTimeout and DefaultTimeout.
	ConnectTimeout, Timeout time.Duration
	Dial                    Dialer
	// MaxInFlight bounds the requests outstanding at once (by default as
	// many as Rate sends within Timeout: the client is never the limit).
	MaxInFlight int
	// Timeline keeps every request's outcome, to count them by period.
	Timeline bool
}

// The timeouts of the measurements' client: those of a client that
// tolerates a lost SYN (retransmitted after 1 s) or a stalled machine,
// as real ones do (Envoy's connect timeout is 5 s; curl's and Go's
// defaults are minutes), so that a failure is the system's. A request
// that succeeds only after a loss shows as slow (SlowAfter).
const (
	DefaultConnectTimeout = 5 * time.Second
	DefaultTimeout        = 10 * time.Second
	// SlowAfter marks a successful request as slow in Result.Slow.
	SlowAfter = time.Second
)

// Outcome is how one request ended, at the time it was sent.
type Outcome struct {
	At   time.Time
	Took time.Duration
	Kind string // "" for success
	// Detail, for a failed or slow HTTP request, is when its connect
	// began and ended (from the send): a client slow to reach connect is
	// told from a SYN that got no answer.
	Detail string
	// Connected is when an HTTP request's connection was made: its
	// handshake done, even if reset before the connect returned (zero:
	// never).
	Connected time.Time
}

// LostWith reports whether o may have failed because the server process
// it reached ended at end: sent before end, its connection made (the
// server's kernel accepted it, into the process's accept queue or its
// hands) and then broken (reset or closed). A request in flight to a
// process when it dies, or in the queue of a listener when it closes,
// is lost with it in every system: the kernel resets what no process
// will read. A request sent after end cannot have reached the ended
// process's socket, so it never counts: what a test may not lose are
// those, which a proxy and the pod's namespace decide. The send time,
// not when the client saw its connect done, is compared with end: the
// client sees that late when it is slow to run.
func LostWith(o Outcome, end time.Time) bool {
	return (o.Kind == "reset" || o.Kind == "closed") && !o.Connected.IsZero() && o.At.Before(end)
}

// Kill is a server process killed At that ended at Ended (zero: not
// known, and then no request is lost with it).
type Kill struct{ At, Ended time.Time }

// SplitLost takes from outcomes the failed requests lost with one of
// kills: in flight at the kill or sent after it, and LostWith its end.
// lost[i] are those of kills[i] (the first kill that explains one).
func SplitLost(outcomes []Outcome, kills []Kill) (kept []Outcome, lost [][]Outcome) {
	lost = make([][]Outcome, len(kills))
outcome:
	for _, o := range outcomes {
		if o.Kind != "" {
			for i, k := range kills {
				if !k.Ended.IsZero() && o.At.Add(o.Took).After(k.At) && LostWith(o, k.Ended) {
					lost[i] = append(lost[i], o)
					continue outcome
				}
			}
		}
		kept = append(kept, o)
	}
	return kept, lost
}

func (o Outcome) String() string {
	s := o.At.Format("15:04:05.000") + " " + o.Kind
	if o.Detail != "" {
		s += " (" + o.Detail + ")"
	}
	return s
}

// Stall is a period in which the client's own process did not run (its
// heartbeat came late): reported beside failed and slow requests, to
// explain them, never to excuse them.
type Stall struct {
	At  time.Time
	Len time.Duration
}

func (st Stall) String() string {
	return fmt.Sprintf("client stalled %v at %s", st.Len.Round(time.Millisecond), st.At.Format("15:04:05.000"))
}

// stallThreshold is the heartbeat lateness reported as a stall: well
// above a busy machine's scheduling delays.
const stallThreshold = 200 * time.Millisecond

// watchStalls records, until ctx ends, the periods longer than
// stallThreshold in which a 10 ms heartbeat did not run.
func watchStalls(ctx context.Context) func() []Stall {
	var (
		mu     sync.Mutex
		stalls []Stall
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		last := time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				n := time.Now()
				if gap := n.Sub(last); gap > stallThreshold {
					mu.Lock()
					stalls = append(stalls, Stall{At: last, Len: gap})
					mu.Unlock()
				}
				last = n
			}
		}
	}()
	return func() []Stall {
		<-done
		mu.Lock()
		defer mu.Unlock()
		return stalls
	}
}

// Count tallies outcomes sent in [from, to), the failures by kind.
func Count(outcomes []Outcome, from, to time.Time) (sent, failed int, kinds map[string]int) {
	kinds = map[string]int{}
	for _, o := range outcomes {
		if o.At.Before(from) || !o.At.Before(to) {
			continue
		}
		sent++
		if o.Kind != "" {
			failed++
			kinds[o.Kind]++
		}
	}
	return sent, failed, kinds
}

// Result counts the requests of one target by outcome.
type Result struct {
	Name   string
	Sent   int
	OK     int
	Errors map[string]int // by kind: refused, reset, timeout, no route, status 503, …
	// First and Last failure, zero when none.
	First, Last time.Time
	// Answers counts the successful answers' bodies (pod names).
	Answers map[string]int
	// Outcomes, with Target.Timeline.
	Outcomes []Outcome
	// Slow are the successful requests that took longer than
	// SlowAfter (a lost SYN retransmitted, a stalled machine).
	Slow []Outcome
	// Stalls of the client process while failed or slow requests were in
	// flight.
	Stalls []Stall

	failures []Outcome
}

// Failed is the number of requests that did not succeed.
func (r Result) Failed() int { return r.Sent - r.OK }

func (r Result) String() string {
	var kinds []string
	for k, n := range r.Errors {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(kinds)
	s := fmt.Sprintf("%s: %d sent, %d ok, %d failed", r.Name, r.Sent, r.OK, r.Failed())
	if len(r.Slow) > 0 {
		s += fmt.Sprintf(", %d slow", len(r.Slow))
	}
	if len(kinds) > 0 {
		s += " (" + strings.Join(kinds, ", ") + fmt.Sprintf("; between %s and %s)", r.First.Format("15:04:05.000"), r.Last.Format("15:04:05.000"))
	}
	for i, o := range r.failures {
		if i == maxListedFailures {
			s += fmt.Sprintf("; %d more", len(r.failures)-i)
			break
		}
		s += "; " + o.String()
	}
	for i, o := range r.Slow {
		if i == maxListedFailures {
			s += fmt.Sprintf("; %d more slow", len(r.Slow)-i)
			break
		}
		s += fmt.Sprintf("; slow %s %v", o, o.Took.Round(time.Millisecond))
	}
	for _, st := range r.Stalls {
		s += "; " + st.String()
	}
	return s
}

// maxListedFailures bounds the failed requests a Result's text lists.
const maxListedFailures = 5

// Run sends requests to every target until ctx ends, then waits for the
// outstanding ones and returns the counts, in the targets' order.
func Run(ctx context.Context, targets ...Target) []Result {
	lockOnce.Do(lockMemory)
	results := make([]Result, len(targets))
	stalls := watchStalls(ctx)
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Add(1)
		go func() { defer wg.Done(); results[i] = run(ctx, t) }()
	}
	wg.Wait()
	all := stalls()
	for i := range results {
		results[i].Stalls = overlapping(all, slices.Concat(results[i].failures, results[i].Slow))
	}
	return results
}

var lockOnce sync.Once

// lockMemory keeps the client's pages in memory. On machines that keep
// little page cache (ours re-read file pages from disk all the time), a
// busy disk stalls a process for hundreds of milliseconds each time it
// touches code or data not touched lately, and a request in flight then
// times out in the client, whatever the network did. What the process has
// mapped now is locked at once; what it maps later, page by page as used.
// Root (the tests that measure) may; where it fails, stalls show in
// Result.Stalls instead.
func lockMemory() {
	if unix.Mlockall(unix.MCL_CURRENT) == nil {
		_ = unix.Mlockall(unix.MCL_FUTURE | unix.MCL_ONFAULT)
	}
}

// overlapping returns the stalls that overlap one of the periods.
func overlapping(stalls []Stall, periods []Outcome) []Stall {
	var out []Stall
	for _, st := range stalls {
		for _, p := range periods {
			if st.At.Before(p.At.Add(p.Took)) && p.At.Before(st.At.Add(st.Len)) {
				out = append(out, st)
				break
			}
		}
	}
	return out
}

func run(ctx context.Context, t Target) Result {
	timeout := cmp.Or(t.Timeout, DefaultTimeout)
	connectTimeout := cmp.Or(t.ConnectTimeout, DefaultConnectTimeout)
	inflight := t.MaxInFlight
	if inflight == 0 {
		inflight = max(t.Rate, 1) * int(max(timeout/time.Second, 1))
	}
	dial := t.Dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	client := &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{DisableKeepAlives: true, ResponseHeaderTimeout: timeout,
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				ctx, cancel := context.WithTimeout(ctx, connectTimeout)
				defer cancel()
				return dial(ctx, network, addr)
			}},
	}
	var mu sync.Mutex
	answers := map[string]int{}
	outcomes := every(ctx, t.Rate, inflight, func() (string, string, time.Time) {
		body, kind, detail, connected := get(client, t.URL, t.Host)
		if kind == "" {
			mu.Lock()
			answers[body]++
			mu.Unlock()
		}
		return kind, detail, connected
	})
	res := Result{Name: t.Name, Errors: map[string]int{}, Answers: answers}
	for _, o := range outcomes {
		res.Sent++
		if o.Kind == "" {
			res.OK++
			if o.Took > SlowAfter {
				res.Slow = append(res.Slow, o)
			}
		} else {
			res.fail(o.Kind, o.At)
			res.failures = append(res.failures, o)
		}
	}
	slices.SortFunc(res.failures, func(a, b Outcome) int { return a.At.Compare(b.At) })
	slices.SortFunc(res.Slow, func(a, b Outcome) int { return a.At.Compare(b.At) })
	if t.Timeline {
		res.Outcomes = outcomes
	}
	return res
}

func (r *Result) fail(kind string, at time.Time) {
	r.Errors[kind]++
	if r.First.IsZero() || at.Before(r.First) {
		r.First = at
	}
	if at.After(r.Last) {
		r.Last = at
	}
}

// get fetches url and returns the body, or the kind of failure and when
// the request's connect began and ended.
func get(c *http.Client, url, host string) (body, kind, detail string, connectedAt time.Time) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return "", "bad request: " + err.Error(), "", time.Time{}
	}
	if host != "" {
		req.Host = host
	}
	// A timeout before the connection was made (a SYN or SYN-ACK lost:
	// the rules, the path) is told from one after it (a slow server).
	// The connect's start and end come from the net.Dialer inside the
	// target's Dialer (the trace rides in the context it is given).
	var (
		connected, madeConn atomic.Bool  // GotConn; a connect without error
		connStart, connDone atomic.Int64 // ns after start, 0: not yet
		start               = time.Now()
		since               = func() int64 { return max(int64(time.Since(start)), 1) }
	)
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		ConnectStart: func(string, string) { connStart.CompareAndSwap(0, since()) },
		ConnectDone: func(_, _ string, err error) {
			connDone.CompareAndSwap(0, since())
			// A reset before the connect returned (not a refusal, which
			// is ECONNREFUSED) comes after the handshake: made too.
			if err == nil || errors.Is(err, syscall.ECONNRESET) {
				madeConn.Store(true)
			}
		},
		GotConn: func(httptrace.GotConnInfo) { connected.Store(true) },
	}))
	at := func() time.Time {
		// The connect's end, not GotConn: a connection the server resets
		// at once may fail the request before the transport hands it over.
		if !madeConn.Load() || connDone.Load() == 0 {
			return time.Time{}
		}
		return start.Add(time.Duration(connDone.Load()))
	}
	failed := func(err error) (string, string, string, time.Time) {
		kind := Classify(err)
		if kind == "timeout" && !connected.Load() {
			kind = "timeout connecting"
		}
		return "", kind, connectPhases(time.Duration(connStart.Load()), time.Duration(connDone.Load())), at()
	}
	resp, err := c.Do(req)
	if err != nil {
		return failed(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return failed(err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Sprintf("status %d", resp.StatusCode), "", at()
	}
	if time.Since(start) > SlowAfter {
		// Where a slow request spent its time.
		detail = connectPhases(time.Duration(connStart.Load()), time.Duration(connDone.Load()))
	}
	return strings.TrimSpace(string(b)), "", detail, at()
}

// connectPhases says when a connect began and ended after its request
// was sent (zero: it did not).
func connectPhases(began, ended time.Duration) string {
	ms := func(d time.Duration) string { return fmt.Sprintf("+%dms", d.Milliseconds()) }
	switch {
	case began == 0:
		return "connect not begun"
	case ended == 0:
		return "connect began " + ms(began) + ", not done"
	}
	return "connect " + ms(began) + " to " + ms(ended)
}

// Classify names the kind of a request's failure.
func Classify(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "reset"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "no route"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "closed"
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	return "other: " + err.Error()
}

// Every calls do at rate per second until ctx ends (at most inflight
// calls outstanding; a tick with none free is a "client saturated"
// failure) and returns each call's outcome: do returns "" for success or
// the kind of failure.
func Every(ctx context.Context, rate, inflight int, do func() string) []Outcome {
	return every(ctx, rate, inflight, func() (string, string, time.Time) { return do(), "", time.Time{} })
}

// every is Every for a do that also says what a failure went through
// and when its connection was made.
func every(ctx context.Context, rate, inflight int, do func() (kind, detail string, connected time.Time)) []Outcome {
	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		out []Outcome
	)
	sem := make(chan struct{}, max(inflight, 1))
	tick := time.NewTicker(time.Second / time.Duration(max(rate, 1)))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return out
		case <-tick.C:
		}
		at := time.Now()
		select {
		case sem <- struct{}{}:
		default:
			mu.Lock()
			out = append(out, Outcome{At: at, Kind: "client saturated"})
			mu.Unlock()
			continue
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			kind, detail, connected := do()
			took := time.Since(at)
			mu.Lock()
			out = append(out, Outcome{At: at, Took: took, Kind: kind, Detail: detail, Connected: connected})
			mu.Unlock()
		}()
	}
}
