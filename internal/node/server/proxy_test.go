package server

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
)

// TestServeProxyTargets: the node's proxy reaches pod addresses only
// (the node's own is that of its hostNetwork pods).
func TestServeProxyTargets(t *testing.T) {
	// A server on the node's address (loopback here) stands for a
	// hostNetwork pod.
	hostPod := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("host pod at " + r.URL.Path)) }))
	t.Cleanup(hostPod.Close)
	hostPort := strconv.Itoa(hostPod.Listener.Addr().(*net.TCPAddr).Port)
	s := &Server{cfg: Config{NodeIP: netip.MustParseAddr("127.0.0.1"), ClusterCIDR: netip.MustParsePrefix("10.244.0.0/16"), PodCIDR: netip.MustParsePrefix("10.244.1.0/24")}}
	mux := http.NewServeMux()
	mux.HandleFunc("/proxy/{scheme}/{ip}/{port}/{path...}", s.serveProxy)
	for _, tc := range []struct {
		path string
		code int
		msg  string
	}{
		{"/proxy/http/127.0.0.2/6443/", http.StatusForbidden, "not a pod address"},
		{"/proxy/http/127.0.0.1/" + hostPort + "/results/x", http.StatusOK, "host pod at /results/x"},
		{"/proxy/http/172.18.0.1/6443/", http.StatusForbidden, "not a pod address"},
		{"/proxy/gopher/10.244.1.5/80/", http.StatusBadRequest, "only http and https"},
		{"/proxy/http/nonsense/80/", http.StatusBadRequest, "not an IP address"},
		{"/proxy/http/10.244.1.5/0/", http.StatusBadRequest, "invalid port"},
	} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.path, nil))
		if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.msg) {
			t.Errorf("%s: %d %q, want %d %q", tc.path, rec.Code, rec.Body.String(), tc.code, tc.msg)
		}
	}
}
