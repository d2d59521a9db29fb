package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// NewRecorder returns an event recorder that writes core/v1 Events as
// component, until ctx ends; `kubectl describe` shows them.
func NewRecorder(ctx context.Context, client kubernetes.Interface, component string) record.EventRecorder {
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	go func() { <-ctx.Done(); b.Shutdown() }()
	return b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: component})
}
