package podstate

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func spec(name string, ports ...int32) corev1.Container {
	c := corev1.Container{Name: name, Image: "svcnet/echo"}
	for _, p := range ports {
		c.Ports = append(c.Ports, corev1.ContainerPort{ContainerPort: p})
	}
	return c
}

func podOf(policy corev1.RestartPolicy, init []corev1.Container, containers ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"},
		Spec: corev1.PodSpec{RestartPolicy: policy, InitContainers: init, Containers: containers}}
}

// run starts c at t0 and ends it with code after d.
func run(c *Container, code int, d time.Duration) {
	c.Started(t0)
	c.Exited(code, t0, t0.Add(d))
}

func TestPhase(t *testing.T) {
	cases := []struct {
		name   string
		policy corev1.RestartPolicy
		init   bool
		setup  func(p *Pod)
		want   corev1.PodPhase
	}{
		{"nothing started", corev1.RestartPolicyAlways, false, func(*Pod) {}, corev1.PodPending},
		{"running", corev1.RestartPolicyAlways, false, func(p *Pod) { p.Containers[0].Started(t0) }, corev1.PodRunning},
		{"in back-off is still running", corev1.RestartPolicyAlways, false, func(p *Pod) {
			c := p.Containers[0]
			run(c, 1, time.Second)
			c.ScheduleRestart("p", t0)
		}, corev1.PodRunning},
		{"completed, Never", corev1.RestartPolicyNever, false, func(p *Pod) { run(p.Containers[0], 0, time.Second) }, corev1.PodSucceeded},
		{"failed, Never", corev1.RestartPolicyNever, false, func(p *Pod) { run(p.Containers[0], 2, time.Second) }, corev1.PodFailed},
		{"init running", corev1.RestartPolicyAlways, true, func(p *Pod) { p.Containers[0].Started(t0) }, corev1.PodPending},
		{"init failed, Never", corev1.RestartPolicyNever, true, func(p *Pod) { run(p.Containers[0], 1, time.Second) }, corev1.PodFailed},
		{"init done, main running", corev1.RestartPolicyAlways, true, func(p *Pod) {
			run(p.Containers[0], 0, time.Second)
			p.Containers[1].Started(t0)
		}, corev1.PodRunning},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var init []corev1.Container
			if tc.init {
				init = []corev1.Container{spec("setup")}
			}
			p := New(podOf(tc.policy, init, spec("main")))
			tc.setup(p)
			if got := p.Phase(tc.policy); got != tc.want {
				t.Errorf("phase %s, want %s", got, tc.want)
			}
		})
	}
}

func TestDue(t *testing.T) {
	p := New(podOf(corev1.RestartPolicyAlways, []corev1.Container{spec("a"), spec("b")}, spec("x"), spec("y")))
	names := func(cs []*Container) string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Spec.Name)
		}
		return strings.Join(out, ",")
	}
	steps := []struct {
		do   func()
		at   time.Time
		want string
	}{
		{func() {}, t0, "a"},                                     // init containers one at a time
		{func() { p.Container("a").Started(t0) }, t0, ""},        // the next waits
		{func() { p.Container("a").Exited(0, t0, t0) }, t0, "b"}, // then the next
		{func() { run(p.Container("b"), 0, time.Second) }, t0, "x,y"},
		{func() { p.Container("x").Started(t0); p.Container("y").Started(t0) }, t0, ""},
		{func() {
			y := p.Container("y")
			y.Exited(1, t0, t0.Add(time.Second))
			y.ScheduleRestart("p", t0)
		}, t0.Add(5 * time.Second), ""}, // in back-off (10 s)
		{func() {}, t0.Add(10 * time.Second), "y"},
	}
	for i, s := range steps {
		s.do()
		if got := names(p.Due(corev1.RestartPolicyAlways, s.at)); got != s.want {
			t.Fatalf("step %d: due %q, want %q", i, got, s.want)
		}
	}
	never := New(podOf(corev1.RestartPolicyNever, nil, spec("x")))
	run(never.Containers[0], 1, time.Second)
	if due := never.Due(corev1.RestartPolicyNever, t0.Add(time.Hour)); len(due) != 0 {
		t.Errorf("Never restarts nothing, due %d", len(due))
	}
}

func TestRestartsAndBackoff(t *testing.T) {
	pod := podOf(corev1.RestartPolicyAlways, nil, spec("c"))
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", RestartCount: 4}}
	c := New(pod).Containers[0]
	if c.Restarts != 4 {
		t.Fatalf("a restarted agent continues the count: %d", c.Restarts)
	}
	wantWaits := []string{"back-off 10s", "back-off 20s", "back-off 40s"}
	for i, want := range wantWaits {
		run(c, 1, time.Second)
		if c.State.Terminated.Reason != "Error" || c.State.Terminated.ExitCode != 1 {
			t.Fatalf("terminated %+v", c.State.Terminated)
		}
		c.ScheduleRestart("p", t0)
		if w := c.State.Waiting; w == nil || w.Reason != "CrashLoopBackOff" || !strings.Contains(w.Message, want) {
			t.Fatalf("restart %d: %+v, want %q", i, c.State.Waiting, want)
		}
	}
	if c.Restarts != 4+2 {
		t.Errorf("restarts %d after three starts", c.Restarts)
	}
	// The pod-exec helper's 128 within 2 s is a start error, unless the
	// agent was stopping it.
	c.Started(t0)
	c.Exited(128, t0, t0.Add(time.Second))
	if c.State.Terminated.Reason != "StartError" {
		t.Errorf("reason %s", c.State.Terminated.Reason)
	}
	c.Started(t0)
	c.Killing = true
	c.Exited(128, t0, t0.Add(time.Second))
	if c.State.Terminated.Reason != "Error" {
		t.Errorf("killed: reason %s", c.State.Terminated.Reason)
	}
}

func TestReadiness(t *testing.T) {
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{}}}
	withProbe := spec("c", 8080)
	withProbe.ReadinessProbe = probe
	withStartup := spec("c")
	withStartup.StartupProbe = probe
	cases := []struct {
		name    string
		spec    corev1.Container
		results []Result
		want    bool
	}{
		{"no probe, no ports: ready at start", spec("c"), nil, true},
		{"no probe, a port: not before it listens", spec("c", 8080), nil, false},
		{"no probe, a port: once it listens", spec("c", 8080), []Result{{Listening, true, 1}}, true},
		{"UDP ports are not waited for", corev1.Container{Name: "c", Ports: []corev1.ContainerPort{{ContainerPort: 53, Protocol: corev1.ProtocolUDP}}}, nil, true},
		{"probe: not before it passes", withProbe, nil, false},
		{"probe passes", withProbe, []Result{{Readiness, true, 1}}, true},
		{"probe passes then fails", withProbe, []Result{{Readiness, true, 1}, {Readiness, false, 1}}, false},
		{"a verdict of an earlier start is ignored", withProbe, []Result{{Readiness, true, 0}}, false},
		{"startup probe gates readiness", withStartup, nil, false},
		{"startup probe passed", withStartup, []Result{{Startup, true, 1}}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := NewContainer(tc.spec, false)
			c.Started(t0)
			for _, r := range tc.results {
				c.Probe(r.kind, r.ok, r.gen)
			}
			if got := c.Ready(); got != tc.want {
				t.Errorf("ready %v, want %v", got, tc.want)
			}
			if st := c.Status("img"); st.Ready != tc.want || st.ContainerID != "svcnet://c-1" {
				t.Errorf("status %+v", st)
			}
		})
	}
}

// Result is a probe verdict for the table above.
type Result struct {
	kind ProbeKind
	ok   bool
	gen  int
}

func TestLivenessKillsOnce(t *testing.T) {
	c := NewContainer(spec("c"), false)
	c.Started(t0)
	if a := c.Probe(Liveness, true, 1); a != NoAction {
		t.Errorf("passing liveness: %v", a)
	}
	if a := c.Probe(Liveness, false, 1); a != Kill {
		t.Errorf("failing liveness: %v, want Kill", a)
	}
	if a := c.Probe(Liveness, false, 1); a != NoAction {
		t.Errorf("a second failure while being killed: %v", a)
	}
}

func TestStatus(t *testing.T) {
	pod := podOf(corev1.RestartPolicyAlways, nil, spec("c"))
	pod.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "example.com/lb"}}
	earlier := metav1.NewTime(t0.Add(-time.Hour))
	pod.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: earlier},
		{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: earlier},
		{Type: "example.com/lb", Status: corev1.ConditionFalse},
	}
	p := New(pod)
	p.Containers[0].Started(t0)
	in := StatusInput{Pod: pod, NodeIP: netip.MustParseAddr("172.18.0.11"), PodIP: netip.MustParseAddr("10.244.1.5"),
		StartTime: metav1.NewTime(t0), Now: metav1.NewTime(t0)}
	st := p.Status(in)
	cond := func(typ corev1.PodConditionType) corev1.PodCondition {
		for _, c := range st.Conditions {
			if c.Type == typ {
				return c
			}
		}
		t.Fatalf("no condition %s in %+v", typ, st.Conditions)
		return corev1.PodCondition{}
	}
	if st.Phase != corev1.PodRunning || st.PodIP != "10.244.1.5" || st.HostIP != "172.18.0.11" {
		t.Errorf("status %+v", st)
	}
	if c := cond(corev1.ContainersReady); c.Status != corev1.ConditionTrue || !c.LastTransitionTime.Equal(&earlier) {
		t.Errorf("ContainersReady %+v: the transition time stays while the status does", c)
	}
	if c := cond(corev1.PodReady); c.Status != corev1.ConditionFalse {
		t.Errorf("Ready %+v despite a false readiness gate", c)
	}
	if c := cond("example.com/lb"); c.Status != corev1.ConditionFalse {
		t.Errorf("the readiness gate's condition is kept: %+v", c)
	}
	if c := cond(corev1.PodScheduled); !c.LastTransitionTime.Equal(&earlier) {
		t.Errorf("PodScheduled rewritten: %+v", c)
	}
	in.SandboxErr = "no addresses left"
	if st := p.Status(in); st.Conditions[2].Status != corev1.ConditionFalse {
		t.Errorf("a failing sandbox is not ready: %+v", st.Conditions[2])
	}
	// A finished pod keeps the address it had after its sandbox is gone.
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	pod.Status.PodIP = "10.244.1.5"
	p.Containers[0].Exited(0, t0, t0.Add(time.Second))
	in.PodIP = netip.Addr{}
	if st := p.Status(in); st.Phase != corev1.PodSucceeded || st.PodIP != "10.244.1.5" {
		t.Errorf("finished: %s %q", st.Phase, st.PodIP)
	}
}

func TestTCPPorts(t *testing.T) {
	c := &corev1.Container{Ports: []corev1.ContainerPort{{ContainerPort: 80}, {ContainerPort: 53, Protocol: corev1.ProtocolUDP}, {ContainerPort: 443, Protocol: corev1.ProtocolTCP}}}
	if got := TCPPorts(c); len(got) != 2 || got[0] != 80 || got[1] != 443 {
		t.Errorf("TCPPorts %v", got)
	}
}

// TestAdopted: a container an earlier run of the agent started keeps the
// readiness the API had for that very start, and no other.
func TestAdopted(t *testing.T) {
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{}}}
	withProbe := spec("c", 8080)
	withProbe.ReadinessProbe = probe
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	cases := []struct {
		name string
		spec corev1.Container
		was  corev1.ContainerStatus
		want bool
	}{
		{"ready in the API, same start", withProbe, corev1.ContainerStatus{Name: "c", ContainerID: "svcnet://c-3", State: running, Ready: true}, true},
		{"the API's report is of the start before", withProbe, corev1.ContainerStatus{Name: "c", ContainerID: "svcnet://c-2", State: running, Ready: true}, false},
		{"never reported", withProbe, corev1.ContainerStatus{}, false},
		{"no probe, no ports: ready anyway", spec("c"), corev1.ContainerStatus{}, true},
		{"no probe, a port, reported ready", spec("c", 80), corev1.ContainerStatus{Name: "c", ContainerID: "svcnet://c-3", State: running, Ready: true}, true},
		{"no probe, a port, not reported", spec("c", 80), corev1.ContainerStatus{}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := NewContainer(tc.spec, false)
			c.Adopted(t0, 3, tc.was)
			if !c.Running() || c.Gen != 3 || c.ID() != "svcnet://c-3" {
				t.Fatalf("adopted: running %v gen %d", c.Running(), c.Gen)
			}
			if got := c.Ready(); got != tc.want {
				t.Errorf("ready %v, want %v", got, tc.want)
			}
			// Its next start counts on from the adopted one.
			c.Exited(1, t0, t0.Add(time.Second))
			c.Started(t0)
			if c.Gen != 4 {
				t.Errorf("next start gen %d", c.Gen)
			}
		})
	}
}

// TestRejected: a rejected pod is Failed whatever its containers, with
// the rejection's reason and message in its status.
func TestRejected(t *testing.T) {
	pod := podOf(corev1.RestartPolicyAlways, nil, spec("c"))
	p := New(pod)
	p.Rejected = &Rejection{Reason: "ErrImagePull", Message: "container c: image \"nginx\" is not built into svcnet"}
	st := p.Status(StatusInput{Pod: pod, NodeIP: netip.MustParseAddr("172.18.0.11"), StartTime: metav1.NewTime(t0), Now: metav1.NewTime(t0)})
	if st.Phase != corev1.PodFailed || st.Reason != "ErrImagePull" || !strings.Contains(st.Message, "nginx") {
		t.Errorf("rejected pod: phase %s reason %q message %q", st.Phase, st.Reason, st.Message)
	}
}

func sidecar(name string, probe bool) corev1.Container {
	c := spec(name)
	always := corev1.ContainerRestartPolicyAlways
	c.RestartPolicy = &always
	if probe {
		c.StartupProbe = &corev1.Probe{}
	}
	return c
}

// TestSidecar: a restartable init container holds the init containers
// after it only until it has started, then runs beside the regular
// containers, restarted whatever its exit, counted in readiness but not
// in the phase.
func TestSidecar(t *testing.T) {
	pod := podOf(corev1.RestartPolicyNever, []corev1.Container{sidecar("proxy", true), spec("setup")}, spec("main"))
	p := New(pod)
	names := func(at time.Time) string {
		var out []string
		for _, c := range p.Due(corev1.RestartPolicyNever, at) {
			out = append(out, c.Spec.Name)
		}
		return strings.Join(out, ",")
	}
	proxy, setup, main := p.Container("proxy"), p.Container("setup"), p.Container("main")
	status := func() corev1.PodStatus {
		return p.Status(StatusInput{Pod: pod, NodeIP: netip.MustParseAddr("10.0.0.1"), PodIP: netip.MustParseAddr("10.244.0.5"), Now: metav1.NewTime(t0)})
	}
	steps := []struct {
		name        string
		do          func()
		at          time.Time
		due         string
		phase       corev1.PodPhase
		initialized bool
		ready       bool
	}{
		{"the sidecar starts first", func() {}, t0, "proxy", corev1.PodPending, false, false},
		{"running, not started: the next init waits", func() { proxy.Started(t0) }, t0, "", corev1.PodPending, false, false},
		{"started: the next init runs", func() { proxy.Probe(Startup, true, proxy.Gen) }, t0, "setup", corev1.PodPending, false, false},
		{"a crash after starting holds nothing up", func() {
			setup.Started(t0)
			proxy.Exited(0, t0, t0.Add(time.Second))
			if !proxy.ShouldRestart(corev1.RestartPolicyNever) {
				t.Fatal("a sidecar that exited 0 under restartPolicy Never is not restarted")
			}
			proxy.ScheduleRestart("p", t0)
			setup.Exited(0, t0, t0.Add(time.Second))
		}, t0.Add(time.Minute), "proxy,main", corev1.PodPending, true, false},
		{"all running", func() {
			proxy.Started(t0.Add(time.Minute))
			proxy.Probe(Startup, true, proxy.Gen)
			main.Started(t0.Add(time.Minute))
		}, t0.Add(time.Minute), "", corev1.PodRunning, true, true},
		{"the sidecar not ready: the pod is not", func() { proxy.Probe(Startup, false, proxy.Gen) }, t0.Add(time.Minute), "", corev1.PodRunning, true, false},
		{"the main container done: the pod is, sidecar or not", func() {
			proxy.Probe(Startup, true, proxy.Gen)
			main.Exited(0, t0, t0.Add(2*time.Minute))
		}, t0.Add(2 * time.Minute), "", corev1.PodSucceeded, true, false},
	}
	for _, s := range steps {
		s.do()
		if got := names(s.at); got != s.due {
			t.Fatalf("%s: due %q, want %q", s.name, got, s.due)
		}
		if got := p.Phase(corev1.RestartPolicyNever); got != s.phase {
			t.Fatalf("%s: phase %s, want %s", s.name, got, s.phase)
		}
		st := status()
		if got := ConditionTrue(st.Conditions, corev1.PodInitialized); got != s.initialized {
			t.Fatalf("%s: Initialized %v, want %v", s.name, got, s.initialized)
		}
		if got := ConditionTrue(st.Conditions, corev1.PodReady); got != s.ready {
			t.Fatalf("%s: Ready %v, want %v", s.name, got, s.ready)
		}
	}
}
