package controller

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/svcnet/svcnet/internal/prom"
)

var (
	syncs = prom.CounterVec("svcnet_controller_syncs_total",
		"Syncs of one key by a controller, by result (ok, error, requeue).", "controller", "result")
	syncDuration = prom.HistogramVec("svcnet_controller_sync_duration_seconds", "Time to sync one key.",
		prometheus.ExponentialBuckets(0.0001, 2, 18), "controller")
	depth = prom.GaugeVec("svcnet_controller_queue_depth", "Keys waiting in a controller's queue.", "controller")
)

// RegisterMetrics adds the controllers' metrics to reg.
func RegisterMetrics(reg prometheus.Registerer) error {
	useWorkqueueMetrics()
	for _, c := range []prometheus.Collector{syncs, syncDuration, depth, wqDepth, wqAdds, wqWait, wqWork, wqRetries} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

func observe(name string, start time.Time, err error, requeue bool, queued int) {
	result := "ok"
	switch {
	case err != nil:
		result = "error"
	case requeue:
		result = "requeue"
	}
	syncs.WithLabelValues(name, result).Inc()
	syncDuration.WithLabelValues(name).Observe(time.Since(start).Seconds())
	depth.WithLabelValues(name).Set(float64(queued))
}
