package healthcheck_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svcnet/svcnet/internal/proxy"
	"github.com/svcnet/svcnet/internal/proxy/healthcheck"
	"github.com/svcnet/svcnet/internal/svcstate"
	. "github.com/svcnet/svcnet/internal/svcstate/svctest"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestProxyHealth(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		name        string
		last        time.Time
		ineligible  bool
		path        string
		wantCode    int
		wantEligble bool
	}{
		{name: "before the first sync", path: "/healthz", wantCode: 503, wantEligble: true},
		{name: "fresh rules", last: now.Add(-10 * time.Second), path: "/healthz", wantCode: 200, wantEligble: true},
		{name: "syncs stopped succeeding", last: now.Add(-2 * time.Minute), path: "/healthz", wantCode: 503, wantEligble: true},
		{name: "node being deleted", last: now.Add(-time.Second), ineligible: true, path: "/healthz", wantCode: 503},
		{name: "livez ignores eligibility", last: now.Add(-time.Second), ineligible: true, path: "/livez", wantCode: 200},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := &healthcheck.ProxyHealth{LastSuccess: func() time.Time { return tc.last }, Timeout: time.Minute,
				Now: func() time.Time { return now }}
			if tc.ineligible {
				h.SetNodeEligible(false)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", tc.path, nil))
			if rec.Code != tc.wantCode {
				t.Errorf("code %d, want %d", rec.Code, tc.wantCode)
			}
			var body struct {
				LastUpdated  string `json:"lastUpdated"`
				CurrentTime  string `json:"currentTime"`
				NodeEligible bool   `json:"nodeEligible"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatalf("body %q: %v", rec.Body, err)
			}
			if body.NodeEligible != !tc.ineligible || body.CurrentTime == "" || (body.LastUpdated == "") != tc.last.IsZero() {
				t.Errorf("body %+v", body)
			}
		})
	}
}

// get asks the health-check port that l opened for port.
func get(t *testing.T, l *healthcheck.Loopback, port int) (int, map[string]any, http.Header) {
	t.Helper()
	resp, err := http.Get("http://" + l.Addr(port) + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body, resp.Header
}

func TestServicesAnswerLikeKubeProxy(t *testing.T) {
	l := &healthcheck.Loopback{}
	healthy := true
	ph := &healthcheck.ProxyHealth{Timeout: time.Minute, LastSuccess: func() time.Time {
		if healthy {
			return time.Now()
		}
		return time.Time{}
	}}
	s := healthcheck.NewServices(l, ph, quiet)
	defer s.Close()
	web := types.NamespacedName{Namespace: "default", Name: "web"}
	steps := []struct {
		name     string
		count    int
		healthy  bool
		wantCode int
	}{
		{"local endpoints", 2, true, 200},
		{"none left on this node", 0, true, 503},
		{"back, but the proxy is unhealthy", 1, false, 503},
		{"healthy again", 1, true, 200},
	}
	for _, st := range steps {
		healthy = st.healthy
		if err := s.Sync(map[types.NamespacedName]healthcheck.Service{web: {Port: 30900, LocalEndpoints: st.count}}); err != nil {
			t.Fatal(err)
		}
		code, body, hdr := get(t, l, 30900)
		if code != st.wantCode || body["localEndpoints"] != float64(st.count) || body["serviceProxyHealthy"] != st.healthy {
			t.Errorf("%s: %d %v", st.name, code, body)
		}
		if svc, _ := body["service"].(map[string]any); svc["namespace"] != "default" || svc["name"] != "web" {
			t.Errorf("%s: service %v", st.name, body["service"])
		}
		if hdr.Get("X-Load-Balancing-Endpoint-Weight") == "" || hdr.Get("Content-Type") != "application/json" {
			t.Errorf("%s: headers %v", st.name, hdr)
		}
	}
	// The service goes: its port closes.
	if err := s.Sync(nil); err != nil {
		t.Fatal(err)
	}
	if len(s.Ports()) != 0 {
		t.Errorf("ports still served: %v", s.Ports())
	}
}

func TestDesiredFollowsSnapshots(t *testing.T) {
	tr := svcstate.NewTracker(svcstate.Config{NodeName: "node-a", Logger: quiet})
	d := healthcheck.NewDesired(v1.IPv4Protocol)
	var prev *svcstate.Snapshot
	sync := func() bool {
		cur, ch := tr.Snapshot()
		res := proxy.SyncResult{Previous: prev, Current: cur, Changed: ch.Ports}
		prev = cur
		return d.Update(res)
	}
	lb := Service("default", "web", "10.96.0.10", Port("http", v1.ProtocolTCP, 80, 30080), Port("https", v1.ProtocolTCP, 443, 30443),
		LoadBalancer("198.51.100.1"), ExternalLocal(30900))
	tr.OnServiceAdd(lb)
	tr.OnServiceAdd(Service("default", "other", "10.96.0.11", Port("http", v1.ProtocolTCP, 80, 0)))
	tr.OnEndpointSliceAdd(Slice("default", "web", "web-1", SlicePort("http", v1.ProtocolTCP, 8080), SlicePort("https", v1.ProtocolTCP, 8443),
		Endpoint("10.244.1.2", "node-a"), Endpoint("10.244.1.3", "node-a", NotReady()), Endpoint("10.244.2.2", "node-b")))
	if !sync() {
		t.Fatal("no change reported")
	}
	web := types.NamespacedName{Namespace: "default", Name: "web"}
	if got := d.Services(); len(got) != 1 || got[web] != (healthcheck.Service{Port: 30900, LocalEndpoints: 1}) {
		t.Fatalf("services %v", got)
	}
	if sync() {
		t.Error("nothing changed, yet a change is reported")
	}
	tr.OnEndpointSliceUpdate(nil, Slice("default", "web", "web-1", SlicePort("http", v1.ProtocolTCP, 8080),
		Endpoint("10.244.2.2", "node-b")))
	if !sync() || d.Services()[web].LocalEndpoints != 0 {
		t.Errorf("after the local endpoint left: %v", d.Services())
	}
	tr.OnServiceDelete(lb)
	if !sync() || len(d.Services()) != 0 {
		t.Errorf("after delete: %v", d.Services())
	}
}
