package node

import (
	"context"
	"log/slog"
	"net/netip"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svcnet/svcnet/internal/node/imagepull"
	"github.com/svcnet/svcnet/internal/node/pods"
	"github.com/svcnet/svcnet/internal/node/podstate"
	"github.com/svcnet/svcnet/internal/node/prober"
	"github.com/svcnet/svcnet/internal/node/status"
)

// podWorker runs one pod: an event loop that decides, from the pod's
// spec and its containers' states (podstate), what its sandbox (pods)
// starts and stops, and reports the pod's status. All its state is
// owned by its goroutine; the agent talks to it through channels.
type podWorker struct {
	a   *Agent
	uid types.UID
	dir string

	mu     sync.Mutex
	latest *corev1.Pod
	notify chan struct{}
	gone   chan struct{}
	once   sync.Once

	// exec is what the node server needs to enter the pod (read from
	// other goroutines, replaced whole by the sandbox).
	exec atomic.Pointer[pods.ExecInfo]

	pod       *corev1.Pod
	state     *podstate.Pod
	sb        sandbox
	startTime metav1.Time
	report    status.Reporter
	// nextStorageCheck is when the containers' local storage is next
	// measured against their ephemeral-storage limits.
	nextStorageCheck time.Time
	// hold is the crash hold in place (see crashhold.go), ready the
	// pod's Ready condition as last computed.
	hold  *heldCrash
	ready bool
	// guarded says a serving guard (see guard.go) is in place, for the
	// ports guard at the pod's address guardAddr.
	guarded   bool
	guard     []servedPort
	guardAddr netip.Addr
	// pulls are the pod's image pulls; pulled delivers their ends, and
	// pullCtx, which ends with the worker, bounds them.
	pulls   imagepull.Images
	pulled  chan pulled
	pullCtx context.Context
}

// sandbox is what the worker asks of its pod's processes (pods.Pod).
type sandbox interface {
	Update(pod *corev1.Pod)
	// EnsureSandbox sets up the pod's network, files and volumes and
	// adopts the containers of an earlier run; false: not there yet.
	EnsureSandbox(ctx context.Context) bool
	Adopted() bool
	IP() netip.Addr
	SandboxErr() string
	VolumesWake(d time.Duration) time.Duration

	Container(name string) *pods.Container
	// Publish hands the node server the containers' newest states (why
	// one waits, for logs and attach).
	Publish()
	AnyRunning() bool
	Start(ctx context.Context, name string)
	Exits() <-chan pods.Exit
	Exited(e pods.Exit) (*pods.Container, int)
	Probes() <-chan prober.Result
	Kill(c *pods.Container)
	Terminate(grace time.Duration, onProbe func(prober.Result))
	StorageUsage() map[string]int64

	TeardownNetwork()
	Remove()
}

func newPodWorker(a *Agent, pod *corev1.Pod) *podWorker {
	w := &podWorker{a: a, uid: pod.UID, latest: pod, notify: make(chan struct{}, 1), gone: make(chan struct{}),
		pulled: make(chan pulled),
		dir:    filepath.Join(a.cfg.StateDir, "pods", string(pod.UID)), report: status.Reporter{Client: a.client}}
	w.notify <- struct{}{}
	return w
}

// update hands the worker the newest version of its pod.
func (w *podWorker) update(pod *corev1.Pod) {
	w.mu.Lock()
	w.latest = pod
	w.mu.Unlock()
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

// deleted tells the worker its pod is gone from the API.
func (w *podWorker) deleted() { w.once.Do(func() { close(w.gone) }) }

func (w *podWorker) newest() *corev1.Pod {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.latest
}

func (w *podWorker) log() *slog.Logger {
	return slog.With("pod", w.pod.Namespace+"/"+w.pod.Name)
}

// setPod takes the pod's newest copy, for the worker and its sandbox.
func (w *podWorker) setPod(pod *corev1.Pod) {
	w.pod = pod
	w.sb.Update(pod)
}

// run is the worker's loop: it syncs the pod, reports its status, and
// waits for the next thing to act on — a new copy of the pod, its
// removal, a container's exit, a probe's verdict, the end of an image
// pull, or a timer (restart and pull back-offs, volume refreshes,
// storage checks).
func (w *podWorker) run(ctx context.Context) {
	<-w.notify
	w.pod = w.newest()
	// A restarted agent continues the counts it reported.
	w.state = podstate.New(w.pod)
	w.sb = pods.New(&w.a.pods, w.pod, w.dir, w.state.Containers, w.exec.Store)
	if w.pod.Status.StartTime != nil {
		w.startTime = *w.pod.Status.StartTime
	} else {
		w.startTime = metav1.Now()
	}
	terminal := podstate.Terminal(w.pod.Status.Phase)
	if !terminal {
		w.reject(unpullable(w.pod, w.a.store != nil))
	}
	var cancel context.CancelFunc
	w.pullCtx, cancel = context.WithCancel(ctx)
	defer cancel()
	timer := time.NewTimer(0)
	defer timer.Stop()
	defer w.endHold("")
	defer w.unguard()
	for {
		if w.pod.DeletionTimestamp != nil {
			w.unguard()
			w.endHold("the pod is being deleted")
			w.stopDeleted(ctx, terminal)
			return
		}
		if !terminal {
			terminal = w.sync(ctx)
		}
		w.push(ctx)
		w.syncGuard()
		if w.hold != nil && w.ready {
			w.endHold("the pod is ready again")
		}
		timer.Reset(w.storageWake(w.sb.VolumesWake(w.state.NextWake(time.Now(), w.sb.SandboxErr() != ""))))
		select {
		case <-ctx.Done():
			// The agent stops; its containers do not (their shims keep
			// them, as containers outlive kubelet): the next run adopts
			// them. Their probes end with ctx.
			return
		case <-w.gone:
			w.unguard()
			w.endHold("the pod is gone")
			w.sb.Terminate(pods.GracePeriod(w.pod, nil), w.onProbe)
			w.sb.TeardownNetwork()
			return
		case <-w.notify:
			w.setPod(w.newest())
		case e := <-w.sb.Exits():
			w.onExit(ctx, e)
		case <-w.holdDone():
			w.endHold("")
		case r := <-w.sb.Probes():
			w.onProbe(r)
		case r := <-w.pulled:
			w.onPulled(r)
		case <-timer.C:
		}
	}
}

// sync sets up the sandbox, starts the containers that are due (once
// their images are there) and checks their storage; a rejected pod
// starts nothing; once the pod is done (it reports that), its
// sidecars stop, as kubelet stops them, and its network goes.
func (w *podWorker) sync(ctx context.Context) (terminal bool) {
	if w.state.Rejected == nil && w.sb.EnsureSandbox(ctx) {
		for _, c := range w.state.Due(w.pod.Spec.RestartPolicy, time.Now()) {
			w.startContainer(ctx, c)
		}
		w.pulls.Synced()
	}
	w.checkStorage(ctx)
	if !podstate.Terminal(w.phase()) {
		return false
	}
	if w.sb.AnyRunning() {
		w.terminate(ctx, pods.GracePeriod(w.pod, nil))
	}
	w.sb.TeardownNetwork()
	return true
}

// terminate stops every container, the pod's status published as their
// probes go on deciding its readiness.
func (w *podWorker) terminate(ctx context.Context, grace time.Duration) {
	w.sb.Terminate(grace, func(r prober.Result) {
		w.onProbe(r)
		w.push(ctx)
	})
}

// phase applies kubelet's rules to the containers' states.
func (w *podWorker) phase() corev1.PodPhase { return w.state.Phase(w.pod.Spec.RestartPolicy) }

// push writes the pod's status when it changed.
func (w *podWorker) push(ctx context.Context) {
	st := status.Compute(status.Input{Pod: w.pod, State: w.state, NodeIP: w.a.cfg.NodeIP, PodIP: w.sb.IP(),
		SandboxErr: w.sb.SandboxErr(), StartTime: w.startTime, Reported: w.report.Reported(), Now: metav1.Now()})
	w.ready = podReady(&corev1.Pod{Status: st})
	if err := w.report.Write(ctx, w.pod, st); err != nil {
		w.log().Warn("pod status", "err", err)
	}
}

func (w *podWorker) onExit(ctx context.Context, e pods.Exit) {
	c, code := w.sb.Exited(e)
	if c == nil {
		return
	}
	w.log().Info("container exited", "container", c.Spec.Name, "code", code)
	w.holdAfterCrash(ctx)
	if c.ShouldRestart(w.pod.Spec.RestartPolicy) && w.pod.DeletionTimestamp == nil {
		c.ScheduleRestart(w.pod.Name, time.Now())
		w.a.Event(w.pod, corev1.EventTypeWarning, "BackOff", "Back-off restarting failed container %s in pod %s", c.Spec.Name, w.pod.Name)
	}
}

func (w *podWorker) onProbe(r prober.Result) {
	c := w.sb.Container(r.Container)
	if c == nil || c.Gen != r.Gen || !c.Running() {
		return
	}
	if c.Probe(r.Kind, r.OK, r.Gen) == podstate.Kill {
		w.a.Event(w.pod, corev1.EventTypeWarning, "Unhealthy", "Liveness probe failed: %s", r.Message)
		w.a.Event(w.pod, corev1.EventTypeNormal, "Killing", "Container %s failed liveness probe, will be restarted", c.Spec.Name)
		w.sb.Kill(c)
	}
	if !r.OK && r.Kind != podstate.Liveness {
		w.a.Event(w.pod, corev1.EventTypeWarning, "Unhealthy", "%s probe failed: %s", r.Kind, r.Message)
	}
}
