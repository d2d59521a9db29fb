package svcstate_test

import (
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"

	"github.com/svcnet/svcnet/internal/svcstate"
	. "github.com/svcnet/svcnet/internal/svcstate/svctest"
)

// Informer handlers and the syncing goroutine run concurrently; run with
// -race.
func TestConcurrentEventsAndSnapshots(t *testing.T) {
	tr := svcstate.NewTracker(svcstate.Config{NodeName: "node-a", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				name := fmt.Sprintf("svc-%d-%d", g, i%20)
				tr.OnServiceAdd(Service("ns", name, fmt.Sprintf("10.96.%d.%d", g, i%20+1), Port("http", tcp, 80, 0)))
				tr.OnEndpointSliceAdd(Slice("ns", name, name+"-a", SlicePort("http", tcp, 8080),
					Endpoint(fmt.Sprintf("10.244.%d.%d", g, i%250+1), "node-a")))
				if i%7 == 0 {
					tr.OnServiceDelete(Service("ns", name, ""))
				}
			}
		})
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 300 {
			snap, _ := tr.Snapshot()
			for svc := range snap.All {
				for _, p := range svc.Ports {
					_ = svc.Endpoints(p.Name)
				}
			}
		}
	}()
	wg.Wait()
	<-done
	snap, _ := tr.Snapshot()
	if snap.Len() == 0 || snap.Len() > 80 {
		t.Errorf("len = %d", snap.Len())
	}
}
