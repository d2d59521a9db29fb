// Package healthcheck serves the proxy's own health (/healthz, for the
// node and the load balancers that watch it) and, for every Service with
// externalTrafficPolicy Local, a health-check node port that tells load
// balancers whether this node has endpoints of it — both with
// kube-proxy's responses, so that cloud load balancers configured for
// kube-proxy work unchanged.
package healthcheck

import (
	"fmt"
	"net/http"
	"sync"
	"time"
)

// ProxyHealth says whether the proxy keeps the node's rules up to date.
// It is healthy once a sync has succeeded, for as long as syncs keep
// succeeding: the periodic resync refreshes LastSuccess, so a proxy
// whose syncs fail (or stall) for longer than Timeout turns unhealthy.
type ProxyHealth struct {
	// LastSuccess is when a sync last succeeded; zero before the first.
	LastSuccess func() time.Time
	// Timeout is how old the last success may be. kube-proxy uses twice
	// its sync period.
	Timeout time.Duration
	// Now defaults to time.Now.
	Now func() time.Time

	mu       sync.Mutex
	eligible bool
	set      bool
}

// SetNodeEligible records whether the node may receive load-balancer
// traffic (false while it is being deleted); true until told otherwise.
func (h *ProxyHealth) SetNodeEligible(ok bool) {
	h.mu.Lock()
	h.eligible, h.set = ok, true
	h.mu.Unlock()
}

func (h *ProxyHealth) nodeEligible() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.set || h.eligible
}

func (h *ProxyHealth) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

// Healthy reports whether the rules are fresh, and when they last were.
func (h *ProxyHealth) Healthy() (bool, time.Time) {
	last := h.LastSuccess()
	return !last.IsZero() && h.now().Sub(last) <= h.Timeout, last
}

// ServeHTTP answers /healthz and /livez as kube-proxy does: 200 when
// healthy (and, for /healthz, the node eligible), 503 otherwise, with a
// small JSON body saying when the rules were last updated.
func (h *ProxyHealth) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	healthy, last := h.Healthy()
	eligible := h.nodeEligible()
	ok := healthy
	if r.URL.Path != "/livez" {
		ok = ok && eligible
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if ok {
		w.WriteHeader(http.StatusOK)
	} else {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	lastStr := ""
	if !last.IsZero() {
		lastStr = last.UTC().Format(time.RFC3339Nano)
	}
	fmt.Fprintf(w, `{"lastUpdated": %q,"currentTime": %q, "nodeEligible": %v}`, lastStr, h.now().UTC().Format(time.RFC3339Nano), eligible)
}
