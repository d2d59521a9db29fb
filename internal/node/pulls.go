package node

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/images"
	"github.com/svcnet/svcnet/internal/imagestore"
	"github.com/svcnet/svcnet/internal/node/imagepull"
	"github.com/svcnet/svcnet/internal/node/podstate"
)

// imageStore is the node's image store (imagestore.Store).
type imageStore interface {
	Get(ref string) (*imagestore.Image, error)
	Pull(ctx context.Context, ref string, opts imagestore.PullOptions) (*imagestore.Image, error)
}

// pulled is the end of a pull the worker started.
type pulled struct {
	image  string
	result imagepull.Result
}

// startContainer starts c, which is due, once its image is there: a
// built-in image at once, one of the store by its pull policy, after a
// pull that runs outside the worker's goroutine (its end arrives on
// w.pulled) so that the pod's other work goes on meanwhile.
func (w *podWorker) startContainer(ctx context.Context, c *podstate.Container) {
	if _, builtin := images.Lookup(c.Spec.Image); builtin || w.a.store == nil {
		w.sb.Start(ctx, c.Spec.Name)
		return
	}
	_, err := w.a.store.Get(c.Spec.Image)
	waiting := ""
	if c.State.Waiting != nil {
		waiting = c.State.Waiting.Reason
	}
	v := w.pulls.Check(&c.Spec, waiting, err == nil, time.Now())
	w.record(v.Events)
	switch {
	case v.Start:
		w.sb.Start(ctx, c.Spec.Name)
	case v.Wait != nil:
		c.Waiting(v.Wait.Reason, v.Wait.Message, v.Wait.Until)
		w.sb.Publish()
	default:
		// Its pull runs: the pull's end wakes the worker, no timer.
		c.NextStart = time.Time{}
	}
	if v.Pull {
		w.pull(c.Spec.Image)
	}
}

// pull pulls image with the pod's pull secrets in a goroutine of its
// own. The worker's pull context ends with the worker: a pod deleted
// mid-pull does not wait for it, and the store goes on with the pull
// for other pods that share it.
func (w *podWorker) pull(image string) {
	ctx, pod, a := w.pullCtx, w.pod, w.a
	go func() {
		start := time.Now()
		opts := a.pullOptions
		opts.PullSecrets = imagepull.PullSecrets(ctx, a, pod)
		img, err := a.store.Pull(ctx, image, opts)
		r := pulled{image: image, result: imagepull.Result{Err: err, Took: time.Since(start)}}
		if img != nil {
			r.result.Size = img.Size
		}
		select {
		case w.pulled <- r:
		case <-ctx.Done():
		}
	}()
}

// onPulled takes the end of a pull: the containers waiting for a failed
// one show why; a bare pod whose registry could not be reached fails
// (imagepull.FailsBarePod). Those waiting for a successful one start on
// the sync that follows.
func (w *podWorker) onPulled(r pulled) {
	evs, wait := w.pulls.Done(r.image, r.result, time.Now())
	w.record(evs)
	// A pod that ended meanwhile keeps the states it ended with.
	if wait == nil || podstate.Terminal(w.phase()) {
		return
	}
	w.log().Info("image pull failed", "image", r.image, "err", r.result.Err)
	started := slices.ContainsFunc(w.state.Containers, func(c *podstate.Container) bool { return c.Gen > 0 })
	if !started && metav1.GetControllerOf(w.pod) == nil && imagepull.FailsBarePod(r.result.Err) {
		// The pod ends here, so its message says what svcnet has
		// instead: its built-in images may be what was meant.
		msg := fmt.Sprintf("%v; %v", r.result.Err, images.ErrNotBuiltin(r.image))
		w.state.Rejected = &podstate.Rejection{Reason: wait.Reason, Message: fmt.Sprintf("Failed to pull image %q: %s", r.image, msg)}
		wait.Message = msg
	}
	for _, c := range w.state.Containers {
		if c.Spec.Image == r.image && !c.Running() && c.State.Waiting != nil {
			c.Waiting(wait.Reason, wait.Message, wait.Until)
		}
	}
	w.sb.Publish()
}

func (w *podWorker) record(evs []imagepull.Event) {
	for _, e := range evs {
		w.a.Event(w.pod, e.Type, e.Reason, "%s", e.Message)
	}
}

// ServiceAccount implements imagepull.SecretSource.
func (a *Agent) ServiceAccount(ctx context.Context, ns, name string) (*corev1.ServiceAccount, error) {
	return a.client.CoreV1().ServiceAccounts(ns).Get(ctx, name, metav1.GetOptions{})
}
