package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
)

// PodWriter creates and deletes the pods of a workload object, recording
// an event on the object for each.
type PodWriter struct {
	Client   kubernetes.Interface
	Recorder record.EventRecorder
}

// CreateExpected creates pods, in order, for the object key names (owner).
// They are all expected first, so that a sync that runs before the
// informer has seen them does not create them again. At the first failure
// the creations that will not come stop being expected, a FailedCreate
// event is recorded, and the pod and error are returned. created is the
// message of a pod's SuccessfulCreate event, given the pod as created.
func (w PodWriter) CreateExpected(ctx context.Context, expect *Expectations, key string, owner runtime.Object, pods []*corev1.Pod, created func(*corev1.Pod) string) (*corev1.Pod, error) {
	if len(pods) > 0 {
		expect.ExpectCreations(key, len(pods))
	}
	for i, p := range pods {
		out, err := w.Client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			for range len(pods) - i {
				expect.CreationObserved(key)
			}
			w.Recorder.Eventf(owner, corev1.EventTypeWarning, "FailedCreate", "Error creating: %v", err)
			return p, err
		}
		w.Recorder.Eventf(owner, corev1.EventTypeNormal, "SuccessfulCreate", "%s", created(out))
	}
	return nil, nil
}

// Delete deletes pods, each only while it is still the pod that was
// listed (its UID): one already gone or replaced needs no deletion and is
// no error. deleted is the message of a pod's SuccessfulDelete event.
func (w PodWriter) Delete(ctx context.Context, owner runtime.Object, pods []*corev1.Pod, deleted func(*corev1.Pod) string) error {
	for _, p := range pods {
		err := w.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("delete pod %s: %w", p.Name, err)
		}
		w.Recorder.Eventf(owner, corev1.EventTypeNormal, "SuccessfulDelete", "%s", deleted(p))
	}
	return nil
}
