// Package programmed lets the consumers of EndpointSlices that route
// traffic (the node proxies, the ingress controllers) say how far their
// data path reflects the slices, and lets a node agent wait, before it
// stops a pod, until every one of them has stopped sending it new
// connections.
//
// Each consumer keeps one Lease labelled ConsumerLabel (a proxy's in
// kube-system, an ingress replica's in its own namespace).
// Its VersionAnnotation is a watermark: every EndpointSlice change up to
// that resourceVersion is in the consumer's data path. The consumer
// renews the Lease while it is healthy, as kubelet renews its node's,
// and writes it when the watermark moves, at most once a second; a Lease
// not renewed within its duration is a consumer gone silent, which no
// one waits for. docs/architecture.md has the costs.
//
// Watermarks compare resourceVersions as numbers: they are etcd
// revisions on kube-apiserver and on svcnet's API server, and one watch
// delivers its events in their order, so a consumer that has applied an
// event of version v has applied every earlier event of its watch.
package programmed

import (
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/svcnet/svcnet/internal/svcstate"
)

const (
	// Namespace holds the proxies' Leases.
	Namespace = "kube-system"
	// ConsumerLabel marks a consumer's Lease; its value is the kind of
	// consumer ("proxy", "ingress").
	ConsumerLabel = "svcnet.dev/endpointslice-consumer"
	// VersionAnnotation is the Lease's watermark: the newest
	// EndpointSlice resourceVersion the consumer's data path reflects.
	VersionAnnotation = "svcnet.dev/endpointslices-programmed"
)

// LeaseName is the Lease of a consumer: a node's proxy, an ingress
// replica.
func LeaseName(kind, holder string) string { return "svcnet-" + kind + "-" + holder }

// Version reads a Lease's watermark; false if it has none.
func Version(l *coordinationv1.Lease) (uint64, bool) {
	return svcstate.ParseResourceVersion(l.Annotations[VersionAnnotation])
}

// Expiry is when a Lease stops counting: its last renewal plus its
// duration. A Lease without either has expired.
func Expiry(l *coordinationv1.Lease) time.Time {
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return time.Time{}
	}
	return l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second)
}

func formatVersion(v uint64) string { return strconv.FormatUint(v, 10) }
