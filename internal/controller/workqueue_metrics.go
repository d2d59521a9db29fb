package controller

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"

	"github.com/svcnet/svcnet/internal/prom"
)

// The upstream work-queue metrics (workqueue_depth, workqueue_queue_duration_seconds …),
// so the time a key waits is told apart from the time its sync takes.
var (
	wqDepth   = prom.GaugeVec("workqueue_depth", "Current depth of workqueue", "name")
	wqAdds    = prom.CounterVec("workqueue_adds_total", "Total number of adds handled by workqueue", "name")
	wqWait    = prom.HistogramVec("workqueue_queue_duration_seconds", "How long in seconds an item stays in workqueue before being requested.", wqBuckets, "name")
	wqWork    = prom.HistogramVec("workqueue_work_duration_seconds", "How long in seconds processing an item from workqueue takes.", wqBuckets, "name")
	wqRetries = prom.CounterVec("workqueue_retries_total", "Total number of retries handled by workqueue", "name")
	wqBuckets = prometheus.ExponentialBuckets(1e-5, 2, 22)
	wqOnce    sync.Once
)

type wqProvider struct{}

func (wqProvider) NewDepthMetric(name string) workqueue.GaugeMetric {
	return wqDepth.WithLabelValues(name)
}
func (wqProvider) NewAddsMetric(name string) workqueue.CounterMetric {
	return wqAdds.WithLabelValues(name)
}
func (wqProvider) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return wqWait.WithLabelValues(name)
}
func (wqProvider) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return wqWork.WithLabelValues(name)
}
func (wqProvider) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return noopGauge{}
}
func (wqProvider) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return noopGauge{}
}
func (wqProvider) NewRetriesMetric(name string) workqueue.CounterMetric {
	return wqRetries.WithLabelValues(name)
}

type noopGauge struct{}

func (noopGauge) Set(float64) {}

// useWorkqueueMetrics makes client-go's work queues report to the
// collectors above; it must run before the first queue is made.
func useWorkqueueMetrics() {
	wqOnce.Do(func() { workqueue.SetProvider(wqProvider{}) })
}
