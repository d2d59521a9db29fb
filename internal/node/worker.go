package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svcnet/svcnet/internal/images"
	"github.com/svcnet/svcnet/internal/node/confine"
	"github.com/svcnet/svcnet/internal/node/hostports"
	"github.com/svcnet/svcnet/internal/node/podstate"
	"github.com/svcnet/svcnet/internal/node/prober"
	"github.com/svcnet/svcnet/internal/node/runtime"
)

// podWorker runs one pod: its network, its containers, their probes and
// restarts, its status, and its termination. All its state is owned by
// its goroutine; the agent talks to it through channels.
type podWorker struct {
	a   *Agent
	uid types.UID
	dir string

	mu     sync.Mutex
	latest *corev1.Pod
	notify chan struct{}
	gone   chan struct{}
	once   sync.Once

	exits  chan exitEvent
	probes chan prober.Result

	// exec is what the node server needs to enter the pod (read from
	// other goroutines, replaced whole by the worker).
	exec atomic.Pointer[execInfo]

	pod        *corev1.Pod
	state      *podstate.Pod
	ip         netip.Addr
	netns      string
	containers []*container
	startTime  metav1.Time
	sandboxErr string
	vols       apiVolumes
	adopted    bool // looked for containers of an earlier run
	pushed     *corev1.PodStatus
	// nextStorageCheck is when the containers' local storage is next
	// measured against their ephemeral-storage limits.
	nextStorageCheck time.Time
}

// execInfo describes a started pod to exec and log readers.
type execInfo struct {
	netns, hostname string
	env             map[string][]string // by container
	security        map[string]*runtime.Security
	running         map[string]bool   // log files being written
	pids            map[string]int    // running containers' processes, whose mounts exec enters
	waiting         map[string]string // why containers that never ran wait ("ErrImagePull: …")
}

// publish refreshes the pod's execInfo after a container started or stopped.
func (w *podWorker) publish() {
	info := &execInfo{netns: w.netns, hostname: Hostname(w.pod), env: map[string][]string{},
		security: map[string]*runtime.Security{}, running: map[string]bool{}, pids: map[string]int{}, waiting: map[string]string{}}
	for _, c := range w.containers {
		if c.env != nil {
			info.env[c.Spec.Name] = c.env
		}
		if sec, err := w.security(c); err == nil {
			info.security[c.Spec.Name] = sec
		}
		if wt := c.State.Waiting; wt != nil && wt.Reason != "" {
			info.waiting[c.Spec.Name] = wt.Reason + ": " + wt.Message
		}
		if c.Running() {
			info.running[c.logPath] = true
			if c.proc != nil {
				info.pids[c.Spec.Name] = c.proc.Pid()
			}
		}
	}
	w.exec.Store(info)
}

type exitEvent struct {
	c    *container
	gen  int
	code int
	at   time.Time
}

func newPodWorker(a *Agent, pod *corev1.Pod) *podWorker {
	w := &podWorker{a: a, uid: pod.UID, latest: pod, notify: make(chan struct{}, 1), gone: make(chan struct{}),
		exits: make(chan exitEvent, 16), probes: make(chan prober.Result, 16),
		dir: filepath.Join(a.cfg.StateDir, "pods", string(pod.UID))}
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

func (w *podWorker) run(ctx context.Context) {
	<-w.notify
	w.pod = w.newest()
	// A restarted agent continues the counts it reported.
	w.state = podstate.New(w.pod)
	for _, c := range w.state.Containers {
		w.containers = append(w.containers, &container{Container: c})
	}
	if w.pod.Status.StartTime != nil {
		w.startTime = *w.pod.Status.StartTime
	} else {
		w.startTime = metav1.Now()
	}
	terminal := podstate.Terminal(w.pod.Status.Phase)
	if !terminal {
		w.state.Rejected = unpullable(w.pod)
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		if w.pod.DeletionTimestamp != nil {
			if !w.adopted && !terminal {
				// Deleted while the agent was away: stop what an earlier
				// run left running, hooks and grace included.
				w.ensureSandbox(ctx)
			}
			grace := GracePeriod(w.pod, nil)
			svcs := w.a.selectingServices(w.pod)
			if d := drainDelay(w.pod, len(svcs), w.endpointDrainDelay(), grace); d > 0 && w.anyRunning() {
				start := time.Now()
				plan := planDrain(d, grace)
				w.a.awaitUnrouted(ctx, w.pod.Namespace, svcs, w.podAddr(), plan.untilGone)
				select {
				case <-time.After(plan.delay):
				case <-ctx.Done():
				}
				grace -= time.Since(start)
			}
			w.terminate(ctx, grace, true)
			w.finishDeletion(ctx)
			return
		}
		if !terminal {
			w.reconcile(ctx)
			w.checkStorage(ctx)
			if podstate.Terminal(w.phase()) {
				terminal = true
				// The regular containers are done: sidecars stop now,
				// as kubelet stops them.
				if w.anyRunning() {
					w.terminate(ctx, GracePeriod(w.pod, nil), true)
				}
				w.teardownNetwork()
			}
		}
		w.push(ctx)
		timer.Reset(w.storageWake(w.volumesWake(w.state.NextWake(time.Now(), w.sandboxErr != ""))))
		select {
		case <-ctx.Done():
			// The agent stops; its containers do not (their shims keep
			// them, as containers outlive kubelet): the next run adopts
			// them. Their probes end with ctx.
			return
		case <-w.gone:
			w.terminate(ctx, GracePeriod(w.pod, nil), false)
			w.teardownNetwork()
			return
		case <-w.notify:
			w.pod = w.newest()
		case e := <-w.exits:
			w.onExit(e)
		case r := <-w.probes:
			w.onProbe(r)
		case <-timer.C:
		}
	}
}

// unpullable fails a pod of no controller that names an image svcnet
// does not have: no image ever appears on svcnet (they are built in), so
// waiting in ImagePullBackOff as kubelet does would only make `kubectl
// run -it --image=…` time out after a minute instead of saying why at
// once. A controller's pods wait as in Kubernetes: failing them would
// have the controller replace them in a loop.
func unpullable(pod *corev1.Pod) *podstate.Rejection {
	if metav1.GetControllerOf(pod) != nil {
		return nil
	}
	for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
		if _, ok := images.Lookup(c.Image); !ok {
			return &podstate.Rejection{Reason: "ErrImagePull",
				Message: fmt.Sprintf("container %s: %v", c.Name, images.ErrNotBuiltin(c.Image))}
		}
	}
	return nil
}

// podAddr is the pod's address, or "" before its sandbox has one.
func (w *podWorker) podAddr() string {
	if !w.ip.IsValid() {
		return ""
	}
	return w.ip.String()
}

func (w *podWorker) anyRunning() bool {
	return slices.ContainsFunc(w.containers, func(c *container) bool { return c.Running() })
}

func (w *podWorker) container(name string) *container {
	for _, c := range w.containers {
		if c.Spec.Name == name {
			return c
		}
	}
	return nil
}

// endpointDrainDelay is the node's, or the pod's own by annotation.
func (w *podWorker) endpointDrainDelay() time.Duration {
	v, ok := w.pod.Annotations[EndpointDrainDelayAnnotation]
	if !ok {
		return w.a.cfg.EndpointDrainDelay
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		w.a.event(w.pod, corev1.EventTypeWarning, "InvalidAnnotation", "%s=%q is not a duration like 500ms or 0s; using the node's %s",
			EndpointDrainDelayAnnotation, v, w.a.cfg.EndpointDrainDelay)
		return w.a.cfg.EndpointDrainDelay
	}
	return d
}

// reconcile sets up the sandbox and starts the containers that are due.
func (w *podWorker) reconcile(ctx context.Context) {
	if !w.ensureSandbox(ctx) {
		return
	}
	for _, c := range w.state.Due(w.pod.Spec.RestartPolicy, time.Now()) {
		w.start(ctx, w.container(c.Spec.Name))
	}
}

// ensureSandbox sets up (or finds) the pod's network and files, and the
// first time adopts the containers an earlier run of the agent left
// running; it reports whether the sandbox is there.
func (w *podWorker) ensureSandbox(ctx context.Context) bool {
	if !w.ip.IsValid() {
		ip, ns, err := w.setUpNetwork()
		if err != nil {
			w.sandboxErr = err.Error()
			w.log().Warn("pod sandbox failed", "err", err)
			return false
		}
		w.sandboxErr, w.ip, w.netns = "", ip, ns
		if err := w.writeFiles(); err != nil {
			w.sandboxErr = err.Error()
			w.ip = netip.Addr{}
			return false
		}
		if !w.adopted {
			w.adopted = true
			w.adopt(ctx)
		}
	}
	if err := w.syncVolumes(ctx); err != nil {
		w.sandboxErr = err.Error()
		return false
	}
	w.sandboxErr = ""
	return true
}

// setUpNetwork gives the pod its network: the node's own for a
// hostNetwork pod (its address, the agent's namespace), else a namespace
// and an address of its own.
func (w *podWorker) setUpNetwork() (netip.Addr, string, error) {
	if w.pod.Spec.HostNetwork {
		return w.a.cfg.NodeIP, fmt.Sprintf("/proc/%d/ns/net", os.Getpid()), nil
	}
	ip, ns, err := w.a.net.Setup(string(w.uid))
	if err != nil {
		return ip, ns, err
	}
	// The hostPorts belong to the sandbox, as kubelet's CNI portmap maps
	// them with the pod's network.
	if err := w.a.setHostPorts(w.uid, hostports.FromPod(w.pod, ip)); err != nil {
		return netip.Addr{}, "", fmt.Errorf("hostPorts: %w", err)
	}
	return ip, ns, nil
}

func (w *podWorker) writeFiles() error {
	if err := os.MkdirAll(w.dir, 0o755); err != nil {
		return err
	}
	files := map[string]string{
		"resolv.conf": ResolvConf(w.pod, w.a.cfg.ClusterDNS, w.a.cfg.ClusterDomain, w.a.nodeResolv),
		"hosts":       HostsFile(w.pod, w.ip.String(), w.a.cfg.ClusterDomain),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(w.dir, name), []byte(data), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// start launches c, or records why it cannot start.
func (w *podWorker) start(ctx context.Context, c *container) {
	waiting := func(reason, msg string, retry time.Duration) { c.Waiting(reason, msg, time.Now().Add(retry)) }
	img, ok := images.Lookup(c.Spec.Image)
	if !ok {
		msg := images.ErrNotBuiltin(c.Spec.Image).Error()
		if c.State.Waiting == nil || c.State.Waiting.Reason != "ErrImagePull" {
			w.a.event(w.pod, corev1.EventTypeWarning, "Failed", "Failed to pull image %q: %s", c.Spec.Image, msg)
		}
		waiting("ErrImagePull", msg, 30*time.Second)
		w.publish()
		return
	}
	argv, err := w.argv(img, c)
	if err != nil {
		waiting("CreateContainerConfigError", err.Error(), 10*time.Second)
		return
	}
	// The pod's own status (its IP) is visible to the downward API.
	pod := w.pod.DeepCopy()
	pod.Status.PodIP, pod.Status.PodIPs = w.ip.String(), []corev1.PodIP{{IP: w.ip.String()}}
	pod.Status.HostIP = w.a.cfg.NodeIP.String()
	env, err := ContainerEnv(ctx, pod, &c.Spec, w.a.serviceEnv(pod), w.a)
	if err != nil {
		if c.State.Waiting == nil || c.State.Waiting.Reason != "CreateContainerConfigError" {
			w.a.event(w.pod, corev1.EventTypeWarning, "Failed", "Error: %v", err)
		}
		waiting("CreateContainerConfigError", err.Error(), 10*time.Second)
		return
	}
	for i := range argv {
		argv[i] = Expand(argv[i], envMap(env))
	}
	sec, err := w.security(c)
	if err != nil {
		if c.State.Waiting == nil || c.State.Waiting.Reason != "CreateContainerConfigError" {
			w.a.event(w.pod, corev1.EventTypeWarning, "Failed", "Error: %v", err)
		}
		waiting("CreateContainerConfigError", err.Error(), 10*time.Second)
		return
	}
	if err := w.makeDirs(); err != nil {
		waiting("RunContainerError", err.Error(), 10*time.Second)
		return
	}
	logPath := w.logPath(c)
	if c.Gen > 0 {
		_ = os.Rename(logPath, filepath.Join(w.dir, c.Spec.Name+".previous.log"))
	}
	// What a restarted agent needs to adopt this start, written before
	// it: the shim's state directory only ever describes this start.
	run := w.runDir(c)
	runtime.Kill(run) // a shim an earlier run started as it died, unrecorded
	meta, err := json.Marshal(runMeta{Gen: c.Gen + 1})
	if err == nil {
		err = errors.Join(os.RemoveAll(run), os.MkdirAll(run, 0o700))
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(run, "meta.json"), meta, 0o600)
	}
	if err != nil {
		waiting("RunContainerError", err.Error(), 10*time.Second)
		return
	}
	proc, err := runtime.Start(w.a.self, runtime.Spec{
		Exec: runtime.ExecOptions{Netns: w.netns, Hostname: Hostname(w.pod),
			ResolvConf: filepath.Join(w.dir, "resolv.conf"), Hosts: filepath.Join(w.dir, "hosts"),
			Dir: c.Spec.WorkingDir, Argv: argv, Security: sec},
		Env: env, Log: logPath, StateDir: run,
		Stdio: runtime.Stdio{Stdin: c.Spec.Stdin, StdinOnce: c.Spec.StdinOnce, TTY: c.Spec.TTY},
	})
	if err != nil {
		waiting("RunContainerError", err.Error(), 10*time.Second)
		return
	}
	c.Started(proc.Started)
	w.follow(ctx, c, proc, env)
	w.a.event(w.pod, corev1.EventTypeNormal, "Started", "Started container %s", c.Spec.Name)
	w.postStart(ctx, c)
}

// runMeta is what the agent keeps of a container start for adoption
// (its environment is the runtime's).
type runMeta struct {
	Gen int `json:"gen"`
}

func (w *podWorker) runDir(c *container) string  { return filepath.Join(w.dir, c.Spec.Name+".run") }
func (w *podWorker) logPath(c *container) string { return filepath.Join(w.dir, c.Spec.Name+".log") }

// follow takes a started (or adopted) process into the worker: its exit
// becomes an event, its probes run.
func (w *podWorker) follow(ctx context.Context, c *container, proc *runtime.Process, env []string) {
	c.proc, c.logPath, c.env = proc, w.logPath(c), env
	gen := c.Gen
	go func() {
		<-proc.Done()
		w.exits <- exitEvent{c: c, gen: gen, code: proc.ExitCode(), at: proc.Started}
	}()
	w.publish()
	w.startProbes(ctx, c)
}

// adopt takes over the containers an earlier run of the agent started
// and that outlived it (their shims keep them), instead of starting them
// again: a restarted agent does not interrupt its pods. Containers that
// ended meanwhile report their exit as if it had just happened.
func (w *podWorker) adopt(ctx context.Context) {
	for _, c := range w.containers {
		run := w.runDir(c)
		data, err := os.ReadFile(filepath.Join(run, "meta.json"))
		if err != nil {
			continue
		}
		var meta runMeta
		if json.Unmarshal(data, &meta) != nil {
			continue
		}
		proc, err := runtime.Adopt(run)
		if err != nil {
			continue
		}
		env, _ := runtime.Env(run)
		var was corev1.ContainerStatus
		for _, st := range slices.Concat(w.pod.Status.InitContainerStatuses, w.pod.Status.ContainerStatuses) {
			if st.Name == c.Spec.Name {
				was = st
			}
		}
		c.Adopted(proc.Started, meta.Gen, was)
		if code, done := runtime.Finished(run); done {
			// It ended while the agent was away: report the end, never a
			// run that is not there (a finished init container stays
			// finished; a crashed one backs off).
			c.env = env
			c.Exited(code, proc.Started, time.Now())
			if c.ShouldRestart(w.pod.Spec.RestartPolicy) {
				c.ScheduleRestart(w.pod.Name, time.Now())
			}
			continue
		}
		w.follow(ctx, c, proc, env)
		w.log().Info("adopted a running container", "container", c.Spec.Name, "pid", proc.Pid())
	}
}

// argv is the command of c: the image's entrypoint unless the container
// sets command, then args.
func (w *podWorker) argv(img images.Image, c *container) ([]string, error) {
	if img.Name == images.Host {
		if len(c.Spec.Command) == 0 {
			return nil, fmt.Errorf("image %q runs the host executable named by command, and command is empty", images.Host)
		}
		return append(append([]string{}, c.Spec.Command...), c.Spec.Args...), nil
	}
	if img.Argv != nil {
		return img.Argv(c.Spec.Command, c.Spec.Args)
	}
	if len(c.Spec.Command) > 0 {
		return append(append([]string{}, c.Spec.Command...), c.Spec.Args...), nil
	}
	args := c.Spec.Args
	if len(args) == 0 {
		args = img.Cmd
	}
	return append(append([]string{w.a.self}, img.Entrypoint...), args...), nil
}

func envMap(env []string) map[string]string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		for i := 0; i < len(kv); i++ {
			if kv[i] == '=' {
				m[kv[:i]] = kv[i+1:]
				break
			}
		}
	}
	return m
}

// security is how c is confined (the same for its start, its probes and
// hooks, and exec into it).
func (w *podWorker) security(c *container) (*runtime.Security, error) {
	sec, err := confine.For(w.pod, &c.Spec, w.dir)
	if err != nil {
		return nil, err
	}
	// The image's programs are svcnet itself, where the image has them.
	if img, ok := images.Lookup(c.Spec.Image); ok {
		for _, p := range img.Programs {
			sec.Mounts = append(sec.Mounts, runtime.Mount{Source: w.a.self, Target: p, ReadOnly: true})
		}
	}
	return &sec, nil
}

// makeDirs makes the pod's directory, its hostPath volumes that ask to be
// made (and checks the typed ones), and its emptyDir volumes, writable
// by every user as kubelet makes them: containers may run as anyone.
func (w *podWorker) makeDirs() error {
	if err := os.MkdirAll(w.dir, 0o755); err != nil {
		return err
	}
	if err := prepareHostPaths(w.pod); err != nil {
		return err
	}
	for _, d := range confine.EmptyDirs(w.pod, w.dir) {
		if err := os.MkdirAll(d, 0o777); err != nil {
			return err
		}
		if err := os.Chmod(d, 0o777); err != nil { // past the umask
			return err
		}
	}
	return nil
}

// imageCommand is how a command run in a container of image (exec,
// probes, hooks) is started: as the image's own programs would run it.
func imageCommand(image string, cmd []string) ([]string, error) {
	if img, ok := images.Lookup(image); ok && img.Argv != nil {
		return img.Argv(cmd, nil)
	}
	return cmd, nil
}

// execIn runs commands in c's pod with the environment of its current
// start (exec probes and hooks).
func (w *podWorker) execIn(c *container) prober.Exec {
	opts := runtime.ExecOptions{Netns: w.netns, Hostname: Hostname(w.pod),
		ResolvConf: filepath.Join(w.dir, "resolv.conf"), Hosts: filepath.Join(w.dir, "hosts")}
	sec, err := w.security(c)
	env, self, image := c.env, w.a.self, c.Spec.Image
	if c.Running() && c.proc != nil {
		opts.Join = c.proc.Pid()
	}
	return func(cmd []string, timeout time.Duration) ([]byte, int, error) {
		if err != nil {
			return nil, -1, err
		}
		argv, err := imageCommand(image, cmd)
		if err != nil {
			return nil, -1, err
		}
		o := opts
		o.Security = sec
		o.Argv = argv
		return runtime.RunOnce(self, o, env, timeout)
	}
}

// stopPlan copies what stopping c needs, to stop it beside the worker.
func (w *podWorker) stopPlan(c *container) stopPlan {
	pod := w.pod
	return stopPlan{spec: &c.Spec, podIP: w.ip, exec: w.execIn(c), event: func(reason, msg string) {
		w.a.event(pod, corev1.EventTypeWarning, reason, "%s", msg)
	}}
}

// postStart runs c's postStart hook beside it; a failed hook kills the
// container, which then restarts by the pod's policy, as in kubelet
// (which, unlike here, also holds the container's Running state and the
// next container until the hook is done).
func (w *podWorker) postStart(ctx context.Context, c *container) {
	lc := c.Spec.Lifecycle
	if lc == nil || lc.PostStart == nil {
		return
	}
	sp, proc, grace := w.stopPlan(c), c.proc, GracePeriod(w.pod, nil)
	go func() {
		ok, msg := prober.RunHook(ctx, lc.PostStart, sp.spec, sp.podIP, sp.exec, grace)
		if !ok && ctx.Err() == nil {
			sp.event("FailedPostStartHook", "PostStartHook failed: "+msg)
			proc.Stop(hookGraceExtension)
		}
	}()
}

func (w *podWorker) startProbes(ctx context.Context, c *container) {
	pctx, cancel := context.WithCancel(ctx)
	c.stopProbe = cancel
	exec := w.execIn(c) // exec probes run with the container's environment
	if c.NeedsListening() {
		go prober.WaitListening(pctx, c.Spec.Name, podstate.TCPPorts(&c.Spec), w.ip, c.Gen, prober.ListenWait, w.probes)
	}
	for kind, p := range map[podstate.ProbeKind]*corev1.Probe{podstate.Readiness: c.Spec.ReadinessProbe,
		podstate.Liveness: c.Spec.LivenessProbe, podstate.Startup: c.Spec.StartupProbe} {
		if p == nil {
			continue
		}
		pr := &prober.Prober{Kind: kind, Probe: p, Container: &c.Spec, PodIP: w.ip, Exec: exec, Gen: c.Gen, Out: w.probes}
		if kind != podstate.Startup && c.Spec.StartupProbe != nil {
			// Readiness and liveness wait for the startup probe.
			state := c.Container
			go func() {
				for !state.StartedOK() {
					select {
					case <-pctx.Done():
						return
					case <-time.After(200 * time.Millisecond):
					}
				}
				pr.Run(pctx)
			}()
			continue
		}
		go pr.Run(pctx)
	}
}

func (w *podWorker) onExit(e exitEvent) {
	c := e.c
	if c.Gen != e.gen {
		return
	}
	c.exited(e.code, e.at)
	w.publish()
	w.log().Info("container exited", "container", c.Spec.Name, "code", e.code)
	if c.ShouldRestart(w.pod.Spec.RestartPolicy) && w.pod.DeletionTimestamp == nil {
		c.ScheduleRestart(w.pod.Name, time.Now())
		w.a.event(w.pod, corev1.EventTypeWarning, "BackOff", "Back-off restarting failed container %s in pod %s", c.Spec.Name, w.pod.Name)
	}
}

func (w *podWorker) onProbe(r prober.Result) {
	c := w.container(r.Container)
	if c == nil || c.Gen != r.Gen || !c.Running() {
		return
	}
	if c.Probe(r.Kind, r.OK, r.Gen) == podstate.Kill {
		w.a.event(w.pod, corev1.EventTypeWarning, "Unhealthy", "Liveness probe failed: %s", r.Message)
		w.a.event(w.pod, corev1.EventTypeNormal, "Killing", "Container %s failed liveness probe, will be restarted", c.Spec.Name)
		go w.stopPlan(c).stop(c.proc.Stop, GracePeriod(w.pod, nil))
	}
	if !r.OK && r.Kind != podstate.Liveness {
		w.a.event(w.pod, corev1.EventTypeWarning, "Unhealthy", "%s probe failed: %s", r.Kind, r.Message)
	}
}

// terminate stops every container (SIGTERM, then SIGKILL after grace).
// Probe verdicts are still recorded meanwhile, and with report the status
// published, as kubelet keeps probing a terminating pod: a server that
// fails its readiness at SIGTERM is seen unready while it drains.
func (w *podWorker) terminate(ctx context.Context, grace time.Duration, report bool) {
	var wg sync.WaitGroup
	for _, c := range w.containers {
		if c.proc == nil {
			continue
		}
		c.Killing = true
		w.a.event(w.pod, corev1.EventTypeNormal, "Killing", "Stopping container %s", c.Spec.Name)
		wg.Add(1)
		go func(sp stopPlan, p *runtime.Process) { defer wg.Done(); sp.stop(p.Stop, grace) }(w.stopPlan(c), c.proc)
	}
	stopped := make(chan struct{})
	go func() { wg.Wait(); close(stopped) }()
	for waiting := true; waiting; {
		select {
		case <-stopped:
			waiting = false
		case r := <-w.probes:
			w.onProbe(r)
			if report {
				w.push(ctx)
			}
		}
	}
	// Each stopped process reports its exit; record them all.
	for _, c := range w.containers {
		for c.proc != nil {
			e := <-w.exits
			if e.c.Gen == e.gen && e.c.proc != nil {
				e.c.exited(e.code, e.at)
			}
		}
	}
}

func (w *podWorker) teardownNetwork() {
	if err := w.a.setHostPorts(w.uid, nil); err != nil {
		w.log().Warn("remove the pod's hostPorts", "err", err)
	}
	if w.ip.IsValid() && !w.pod.Spec.HostNetwork {
		w.a.net.Teardown(string(w.uid))
		w.ip = netip.Addr{}
	}
}

// finishDeletion removes a terminated pod from the API for good, as
// kubelet does once its containers have stopped.
func (w *podWorker) finishDeletion(ctx context.Context) {
	w.teardownNetwork()
	w.a.net.Teardown(string(w.uid)) // also a sandbox this run never set up
	_ = os.RemoveAll(w.dir)
	uid := w.uid
	zero := int64(0)
	err := w.a.client.CoreV1().Pods(w.pod.Namespace).Delete(ctx, w.pod.Name,
		metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		w.log().Warn("delete terminated pod", "err", err)
	}
}

// push writes the pod's status when it changed, or when the API's copy
// says otherwise: the node lifecycle controller marks the pods of a node
// it has not heard from not ready, and an agent that was only cut off
// must put them back, as kubelet's status manager does.
func (w *podWorker) push(ctx context.Context) {
	st := w.status()
	if w.pushed != nil && apiequality.Semantic.DeepEqual(st, *w.pushed) && podstate.SameConditions(st, w.pod.Status) {
		return
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": w.uid}, "status": st})
	if err != nil {
		return
	}
	_, err = w.a.client.CoreV1().Pods(w.pod.Namespace).Patch(ctx, w.pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		if !apierrors.IsNotFound(err) && ctx.Err() == nil {
			w.log().Warn("pod status", "err", err)
		}
		return
	}
	w.pushed = &st
}
