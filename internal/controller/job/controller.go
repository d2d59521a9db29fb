package job

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/controller"
)

// Controller is the Job controller (with the TTL-after-finished one).
type Controller struct {
	client   kubernetes.Interface
	jobs     batchlisters.JobLister
	pods     corelisters.PodLister
	queue    *controller.Queue
	recorder record.EventRecorder
	expect   *controller.Expectations
}

// New wires the controller to factory's informers.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, recorder record.EventRecorder) *Controller {
	c := &Controller{client: client, jobs: factory.Batch().V1().Jobs().Lister(), pods: factory.Core().V1().Pods().Lister(),
		recorder: recorder, expect: controller.NewExpectations()}
	c.queue = controller.NewQueue("job", c.sync)
	_, _ = factory.Batch().V1().Jobs().Informer().AddEventHandler(c.queue.Handler())
	_, _ = factory.Core().V1().Pods().Informer().AddEventHandler(controller.OwnerHandler("batch/v1", "Job", func(key string) {
		c.expect.CreationObserved(key)
		c.queue.Add(key)
	}))
	return c
}

// Run syncs until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) { c.queue.Run(ctx, workers) }

func (c *Controller) sync(ctx context.Context, key string) (time.Duration, error) {
	job, gone, err := controller.Lookup(key, c.jobs.Jobs)
	if gone {
		c.expect.Forget(key)
		return 0, nil
	}
	if err != nil || job.DeletionTimestamp != nil {
		return 0, err
	}
	ns := job.Namespace
	// Pods created but not yet seen would be created twice.
	if !c.expect.Satisfied(key) {
		return 100 * time.Millisecond, nil
	}
	owned, ok, err := controller.ControlledPods(c.pods, ns, job.Spec.Selector, job.UID)
	if !ok || err != nil {
		return 0, err
	}
	wasFinished := Finished(&job.Status)
	steps := Plan(job, owned, time.Now())
	if steps.Expired {
		err := c.client.BatchV1().Jobs(ns).Delete(ctx, job.Name, metav1.DeleteOptions{
			PropagationPolicy: ptr.To(metav1.DeletePropagationForeground), Preconditions: &metav1.Preconditions{UID: &job.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return 0, err
		}
		return 0, nil
	}
	w := controller.PodWriter{Client: c.client, Recorder: c.recorder}
	if _, err := w.CreateExpected(ctx, c.expect, key, job, steps.Create, func(p *corev1.Pod) string { return "Created pod: " + p.Name }); err != nil {
		return 0, fmt.Errorf("create pod of job %s: %w", key, err)
	}
	if err := w.Delete(ctx, job, steps.Delete, func(p *corev1.Pod) string { return "Deleted pod: " + p.Name }); err != nil {
		return 0, err
	}
	if !apiequality.Semantic.DeepEqual(job.Status, steps.Status) {
		upd := job.DeepCopy()
		upd.Status = steps.Status
		if _, err := c.client.BatchV1().Jobs(ns).UpdateStatus(ctx, upd, metav1.UpdateOptions{}); err != nil {
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				return 100 * time.Millisecond, nil
			}
			return 0, err
		}
		if !wasFinished && Finished(&steps.Status) {
			// As Kubernetes: Completed, or a warning with the failure's reason.
			if fc := condition(&steps.Status, batchv1.JobFailed); fc != nil && fc.Status == corev1.ConditionTrue {
				c.recorder.Eventf(job, corev1.EventTypeWarning, fc.Reason, "%s", fc.Message)
			} else {
				c.recorder.Eventf(job, corev1.EventTypeNormal, "Completed", "Job completed")
			}
		}
	}
	return steps.RequeueAfter, nil
}
