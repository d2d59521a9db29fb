package svcstate_test

import (
	"fmt"
	"testing"

	discovery "k8s.io/api/discovery/v1"

	"github.com/svcnet/svcnet/internal/svcstate"
	. "github.com/svcnet/svcnet/internal/svcstate/svctest"
)

// trackerWith returns a tracker holding n services of 10 endpoints each,
// already snapshotted.
func trackerWith(n int) *svcstate.Tracker {
	tr := newTracker("node-0")
	for i := range n {
		tr.OnServiceAdd(BenchService(i))
		tr.OnEndpointSliceAdd(BenchSlice(i, true))
	}
	tr.Snapshot()
	return tr
}

// BenchmarkSnapshotOneEndpointChange measures applying one EndpointSlice
// update in which one endpoint flips readiness, and taking the snapshot.
// Its cost must not grow with the number of services.
func BenchmarkSnapshotOneEndpointChange(b *testing.B) {
	for _, n := range []int{100, 10000, 100000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			tr := trackerWith(n)
			const rotate = 100
			var versions [2][rotate]*discovery.EndpointSlice
			for i := range rotate {
				versions[0][i] = BenchSlice(i*(n/rotate), false)
				versions[1][i] = BenchSlice(i*(n/rotate), true)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				tr.OnEndpointSliceUpdate(nil, versions[(i/rotate)%2][i%rotate])
				if _, ch := tr.Snapshot(); len(ch.Ports) != 1 {
					b.Fatalf("changes = %v", ch.Ports)
				}
			}
		})
	}
}
