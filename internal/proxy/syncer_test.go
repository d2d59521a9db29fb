package proxy_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/proxy"
	"github.com/svcnet/svcnet/internal/svcstate"
	. "github.com/svcnet/svcnet/internal/svcstate/svctest"
)

// fakeMode records what the Syncer asks of it.
type fakeMode struct {
	writes  []proxy.Write
	intacts int
	// What the next calls answer.
	applyErr  error
	intact    bool
	intactErr error
	makeFull  bool // the mode turns a partial write full
	again     bool
}

func (m *fakeMode) Apply(_ context.Context, w proxy.Write) (proxy.Written, error) {
	w.Changed = maps.Clone(w.Changed)
	m.writes = append(m.writes, w)
	if m.applyErr != nil {
		return proxy.Written{}, m.applyErr
	}
	return proxy.Written{Full: w.Full || m.makeFull, Again: m.again, Stats: proxy.SyncStats{ServicePorts: w.Snapshot.Len(),
		Rules: map[string]int{"nat": 7}, NoLocal: map[string]int{"internal": 1}}}, nil
}

func (m *fakeMode) Intact(context.Context) (bool, error) {
	m.intacts++
	return m.intact, m.intactErr
}

// A step is what happens before one sync, and what the sync must do.
type step struct {
	name   string
	after  time.Duration // since the previous step
	do     func(*syncWorld)
	fail   bool   // the sync returns an error
	write  string // "full", "partial" or "" (the mode is not asked)
	ports  string // the ports of the write, sorted
	canary int    // canary checks during this sync
}

type syncWorld struct {
	tracker *svcstate.Tracker
	mode    *fakeMode
	syncer  *proxy.Syncer
	metrics *proxy.Metrics
	results []proxy.SyncResult
	now     time.Time
	n       int
}

// add adds service web-<n> with one port and one endpoint.
func (w *syncWorld) add() {
	name := fmt.Sprintf("web-%d", w.n)
	w.tracker.OnServiceAdd(Service("default", name, fmt.Sprintf("10.96.0.%d", 10+w.n), Port("http", v1.ProtocolTCP, 80, 0)))
	w.tracker.OnEndpointSliceAdd(Slice("default", name, name+"-1", SlicePort("http", v1.ProtocolTCP, 8080),
		Endpoint(fmt.Sprintf("10.244.1.%d", 10+w.n), "node-a")))
	w.n++
}

func ports(m map[svcstate.ServicePortName]struct{}) string {
	var out []string
	for n := range m {
		out = append(out, n.String())
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

func counter(c interface{ Write(*dto.Metric) error }) float64 {
	var m dto.Metric
	_ = c.Write(&m)
	return m.GetCounter().GetValue()
}

func TestSyncer(t *testing.T) {
	broken := errors.New("boom")
	tests := []struct {
		name  string
		steps []step
	}{
		{"first sync is full, then only changes are written", []step{
			{name: "first", do: (*syncWorld).add, write: "full", ports: "default/web-0:http"},
			{name: "nothing changed", after: time.Second},
			{name: "a change", after: time.Second, do: (*syncWorld).add, write: "partial", ports: "default/web-1:http"},
		}},
		{"the first sync writes in full even with nothing in the cluster", []step{
			{name: "first", write: "full"},
			{name: "quiet", after: time.Second},
		}},
		{"a failed write keeps its changes for a full retry", []step{
			{name: "first", do: (*syncWorld).add, write: "full", ports: "default/web-0:http"},
			{name: "fails", after: time.Second, do: func(w *syncWorld) { w.add(); w.mode.applyErr = broken }, fail: true,
				write: "partial", ports: "default/web-1:http"},
			{name: "retry", after: time.Second, do: func(w *syncWorld) { w.add(); w.mode.applyErr = nil }, write: "full",
				ports: "default/web-1:http default/web-2:http"},
		}},
		{"a quiet sync checks the canary when due and writes all if it died", []step{
			{name: "first", do: (*syncWorld).add, write: "full", ports: "default/web-0:http"},
			{name: "not due", after: 10 * time.Second},
			{name: "intact", after: 30 * time.Second, do: func(w *syncWorld) { w.mode.intact = true }, canary: 1},
			{name: "flushed", after: 30 * time.Second, do: func(w *syncWorld) { w.mode.intact = false }, canary: 1, write: "full"},
			{name: "checked by the full write", after: 10 * time.Second},
		}},
		{"a sync with changes writes them before it checks the canary", []step{
			{name: "first", do: (*syncWorld).add, write: "full", ports: "default/web-0:http"},
			{name: "change, then canary", after: 40 * time.Second, do: func(w *syncWorld) { w.add(); w.mode.intact = false },
				canary: 1, write: "partial", ports: "default/web-1:http"},
			{name: "full after the dead canary", after: time.Second, write: "full"},
		}},
		{"a canary that cannot be read fails the sync", []step{
			{name: "first", write: "full"},
			{name: "unreadable", after: 40 * time.Second, do: func(w *syncWorld) { w.mode.intactErr = broken }, canary: 1, fail: true},
			{name: "full next", after: time.Second, do: func(w *syncWorld) { w.mode.intactErr = nil }, write: "full"},
		}},
		{"full syncs come every FullSyncPeriod and on request", []step{
			{name: "first", write: "full"},
			{name: "period", after: time.Hour, do: func(w *syncWorld) { w.mode.intact = true }, write: "full"},
			{name: "request", after: time.Second, do: func(w *syncWorld) { w.syncer.RequestFullSync() }, write: "full"},
			{name: "quiet", after: time.Second},
		}},
		{"a mode that made a write full restarts the period", []step{
			{name: "first", write: "full"},
			{name: "made full", after: 50 * time.Minute, do: func(w *syncWorld) { w.add(); w.mode.makeFull = true },
				write: "partial", ports: "default/web-0:http"},
			{name: "an hour after the first", after: 20 * time.Minute, do: func(w *syncWorld) { w.add(); w.mode.makeFull = false; w.mode.intact = true },
				write: "partial", ports: "default/web-1:http", canary: 1},
		}},
		{"work left brings the mode back without changes", []step{
			{name: "first", do: func(w *syncWorld) { w.mode.again = true }, write: "full"},
			{name: "again", after: time.Second, do: func(w *syncWorld) { w.mode.again = false }, write: "partial"},
			{name: "done", after: time.Second},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := &syncWorld{mode: &fakeMode{}, metrics: proxy.NewMetrics(nil), now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
			quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
			now := func() time.Time { return w.now }
			w.tracker = svcstate.NewTracker(svcstate.Config{NodeName: "node-a", Logger: quiet, Now: now})
			w.syncer = proxy.NewSyncer(proxy.SyncerConfig{Mode: "fake", Tracker: w.tracker, Metrics: w.metrics, Logger: quiet,
				Now: now, AfterSync: func(r proxy.SyncResult) { w.results = append(w.results, r) }}, w.mode)
			for _, s := range tc.steps {
				w.now = w.now.Add(s.after)
				if s.do != nil {
					s.do(w)
				}
				writes, intacts, results := len(w.mode.writes), w.mode.intacts, len(w.results)
				err := w.syncer.Sync(context.Background())
				if (err != nil) != s.fail {
					t.Fatalf("%s: sync error %v, want failure %v", s.name, err, s.fail)
				}
				got, gotPorts := "", ""
				switch len(w.mode.writes) - writes {
				case 0:
				case 1:
					wr := w.mode.writes[writes]
					got, gotPorts = "partial", ports(wr.Changed)
					if wr.Full {
						got = "full"
					}
				default:
					t.Fatalf("%s: %d writes in one sync", s.name, len(w.mode.writes)-writes)
				}
				if got != s.write || gotPorts != s.ports {
					t.Errorf("%s: write %q of %q, want %q of %q", s.name, got, gotPorts, s.write, s.ports)
				}
				if n := w.mode.intacts - intacts; n != s.canary {
					t.Errorf("%s: %d canary checks, want %d", s.name, n, s.canary)
				}
				// AfterSync follows every successful sync, and only those.
				wantResults := results + 1
				if s.fail {
					wantResults = results
				}
				if len(w.results) != wantResults {
					t.Errorf("%s: AfterSync called %d times, want %d", s.name, len(w.results)-results, wantResults-results)
				}
				if !s.fail {
					if w.syncer.LastSuccess() != w.now || w.syncer.Applied() == nil {
						t.Errorf("%s: success not recorded", s.name)
					}
				}
			}
		})
	}
}

// The first successful sync reports every port as changed, whatever the
// tracker said; later ones what was written; quiet ones nothing.
func TestSyncerResults(t *testing.T) {
	w := &syncWorld{mode: &fakeMode{}, now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	w.tracker = svcstate.NewTracker(svcstate.Config{NodeName: "node-a", Logger: quiet})
	w.add()
	w.add()
	w.tracker.Snapshot() // the changes are taken by someone else
	w.syncer = proxy.NewSyncer(proxy.SyncerConfig{Mode: "fake", Tracker: w.tracker, Logger: quiet,
		Now: func() time.Time { return w.now }, AfterSync: func(r proxy.SyncResult) { w.results = append(w.results, r) }}, w.mode)
	for range 3 {
		if err := w.syncer.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		if len(w.results) == 2 {
			w.add()
		}
		w.now = w.now.Add(time.Second)
	}
	want := []string{"default/web-0:http default/web-1:http", "", "default/web-2:http"}
	for i, r := range w.results {
		if got := ports(r.Changed); got != want[i] {
			t.Errorf("sync %d reported %q changed, want %q", i, got, want[i])
		}
		if i > 0 && r.Previous != w.results[i-1].Current {
			t.Errorf("sync %d: Previous is not the last sync's Current", i)
		}
	}
}

func TestSyncerFailureMetrics(t *testing.T) {
	tests := []struct {
		name                             string
		err                              error
		full                             bool
		sync, restore, partial, nftables float64
	}{
		{"netlink", errors.New("netlink: boom"), false, 1, 0, 0, 0},
		{"partial restore", proxy.RestoreFailed(errors.New("exit 1")), false, 1, 1, 1, 0},
		{"full restore", proxy.RestoreFailed(errors.New("exit 1")), true, 1, 1, 0, 0},
		{"transaction", fmt.Errorf("wrapped: %w", proxy.TransactionFailed(errors.New("EINVAL"))), false, 1, 0, 0, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := &syncWorld{mode: &fakeMode{}, metrics: proxy.NewMetrics(nil)}
			quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
			w.tracker = svcstate.NewTracker(svcstate.Config{NodeName: "node-a", Logger: quiet})
			w.syncer = proxy.NewSyncer(proxy.SyncerConfig{Mode: "fake", Tracker: w.tracker, Metrics: w.metrics, Logger: quiet}, w.mode)
			if !tc.full {
				if err := w.syncer.Sync(context.Background()); err != nil {
					t.Fatal(err)
				}
				w.add()
			}
			w.mode.applyErr = tc.err
			if err := w.syncer.Sync(context.Background()); !errors.Is(err, tc.err) {
				t.Fatalf("sync returned %v, want %v", err, tc.err)
			}
			m := w.metrics
			got := []float64{counter(m.SyncFailures), counter(m.RestoreFailures), counter(m.PartialRestoreFailures), counter(m.NFTablesSyncFailures)}
			want := []float64{tc.sync, tc.restore, tc.partial, tc.nftables}
			if !slices.Equal(got, want) {
				t.Errorf("sync, restore, partial restore, nftables failures = %v, want %v", got, want)
			}
		})
	}
}

// TestSyncerProgrammed: the watermark moves with successful syncs only,
// also those that had nothing to write.
func TestSyncerProgrammed(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	tracker := svcstate.NewTracker(svcstate.Config{NodeName: "node-a", Logger: quiet})
	mode := &fakeMode{}
	syncer := proxy.NewSyncer(proxy.SyncerConfig{Mode: "fake", Tracker: tracker, Logger: quiet}, mode)
	tracker.OnServiceAdd(Service("default", "web", "10.96.0.10", Port("http", v1.ProtocolTCP, 80, 0)))
	slice := func(rv string, ip string) {
		tracker.OnEndpointSliceUpdate(nil, Slice("default", "web", "web-1", SlicePort("http", v1.ProtocolTCP, 8080),
			SliceResourceVersion(rv), Endpoint(ip, "node-a")))
	}
	steps := []struct {
		name     string
		do       func()
		applyErr error
		want     uint64
	}{
		{"before any sync", nil, nil, 0},
		{"first", func() { slice("5", "10.244.1.1") }, nil, 5},
		{"a failed write", func() { slice("8", "10.244.1.2") }, errors.New("boom"), 5},
		{"its retry", nil, nil, 8},
		{"a version that changes nothing", func() { slice("9", "10.244.1.2") }, nil, 9},
	}
	for i, s := range steps {
		if s.do != nil {
			s.do()
		}
		mode.applyErr = s.applyErr
		if i > 0 {
			_ = syncer.Sync(context.Background())
		}
		if got := syncer.Programmed(); got != s.want {
			t.Errorf("%s: Programmed %d, want %d", s.name, got, s.want)
		}
	}
}
