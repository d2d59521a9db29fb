package status

import (
	"context"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/svcnet/svcnet/internal/node/podstate"
)

var (
	nodeIP = netip.MustParseAddr("172.18.0.11")
	podIP  = netip.MustParseAddr("10.244.1.5")
	t0     = metav1.NewTime(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	t1     = metav1.NewTime(t0.Add(time.Minute))
)

func testPod(restart corev1.RestartPolicy) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "u1"},
		Spec: corev1.PodSpec{RestartPolicy: restart, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
}

func condition(st corev1.PodStatus, t corev1.PodConditionType) corev1.PodCondition {
	for _, c := range st.Conditions {
		if c.Type == t {
			return c
		}
	}
	return corev1.PodCondition{}
}

func TestCompute(t *testing.T) {
	for _, tc := range []struct {
		name       string
		restart    corev1.RestartPolicy
		podIP      netip.Addr
		sandboxErr string
		containers func(c *podstate.Container) // drives the one container
		reported   *corev1.PodStatus
		rejected   *podstate.Rejection

		phase              corev1.PodPhase
		wantIP             string
		ready, sandbox     corev1.ConditionStatus
		readyTransition    metav1.Time
		reason, stateShown string // the pod's reason; the container's state
	}{
		{name: "no sandbox yet", restart: corev1.RestartPolicyAlways, sandboxErr: "pod network: no address",
			phase: corev1.PodPending, ready: corev1.ConditionFalse, sandbox: corev1.ConditionFalse, readyTransition: t1, stateShown: "waiting"},
		{name: "running with no readiness probe: ready", restart: corev1.RestartPolicyAlways, podIP: podIP,
			containers: func(c *podstate.Container) { c.Started(t0.Time) },
			phase:      corev1.PodRunning, wantIP: podIP.String(), ready: corev1.ConditionTrue, sandbox: corev1.ConditionTrue, readyTransition: t1, stateShown: "running"},
		{name: "a reported condition keeps its transition time", restart: corev1.RestartPolicyAlways, podIP: podIP,
			containers: func(c *podstate.Container) { c.Started(t0.Time) },
			reported:   &corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: t0}}},
			phase:      corev1.PodRunning, wantIP: podIP.String(), ready: corev1.ConditionTrue, sandbox: corev1.ConditionTrue, readyTransition: t0, stateShown: "running"},
		{name: "done: succeeded, its sandbox gone", restart: corev1.RestartPolicyNever,
			containers: func(c *podstate.Container) { c.Started(t0.Time); c.Exited(0, t0.Time, t1.Time) },
			phase:      corev1.PodSucceeded, ready: corev1.ConditionFalse, sandbox: corev1.ConditionTrue, readyTransition: t1, stateShown: "terminated"},
		{name: "rejected: failed with the reason", restart: corev1.RestartPolicyAlways,
			rejected: &podstate.Rejection{Reason: "ErrImagePull", Message: "no such image"},
			phase:    corev1.PodFailed, ready: corev1.ConditionFalse, sandbox: corev1.ConditionTrue, readyTransition: t1, reason: "ErrImagePull", stateShown: "waiting"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod(tc.restart)
			state := podstate.New(pod)
			state.Rejected = tc.rejected
			if tc.containers != nil {
				tc.containers(state.Containers[0])
			}
			st := Compute(Input{Pod: pod, State: state, NodeIP: nodeIP, PodIP: tc.podIP, SandboxErr: tc.sandboxErr,
				StartTime: t0, Reported: tc.reported, Now: t1})
			if st.Phase != tc.phase || st.PodIP != tc.wantIP || st.HostIP != nodeIP.String() || st.Reason != tc.reason {
				t.Errorf("phase %s, pod IP %q, host IP %q, reason %q; want %s, %q, %s, %q",
					st.Phase, st.PodIP, st.HostIP, st.Reason, tc.phase, tc.wantIP, nodeIP, tc.reason)
			}
			if st.StartTime == nil || !st.StartTime.Equal(&t0) {
				t.Errorf("start time %v, want %v", st.StartTime, t0)
			}
			if c := condition(st, corev1.PodReadyToStartContainers); c.Status != tc.sandbox {
				t.Errorf("PodReadyToStartContainers %s, want %s", c.Status, tc.sandbox)
			}
			if c := condition(st, corev1.ContainersReady); c.Status != tc.ready {
				t.Errorf("ContainersReady %s, want %s", c.Status, tc.ready)
			}
			if c := condition(st, corev1.PodReady); c.Status != tc.ready || !c.LastTransitionTime.Equal(&tc.readyTransition) {
				t.Errorf("Ready %s since %v, want %s since %v", c.Status, c.LastTransitionTime, tc.ready, tc.readyTransition)
			}
			if len(st.ContainerStatuses) != 1 {
				t.Fatalf("container statuses %+v", st.ContainerStatuses)
			}
			cs := st.ContainerStatuses[0].State
			shown := map[bool]string{cs.Waiting != nil: "waiting", cs.Running != nil: "running", cs.Terminated != nil: "terminated"}[true]
			if shown != tc.stateShown {
				t.Errorf("container state %+v, want %s", cs, tc.stateShown)
			}
		})
	}
}

func TestNeedsWrite(t *testing.T) {
	ready := func(s corev1.ConditionStatus) corev1.PodStatus {
		return corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: s, LastTransitionTime: t0}}}
	}
	for _, tc := range []struct {
		name     string
		st       corev1.PodStatus
		reported *corev1.PodStatus
		api      corev1.PodStatus
		want     bool
	}{
		{"nothing written yet", ready(corev1.ConditionTrue), nil, ready(corev1.ConditionTrue), true},
		{"written, and the API agrees", ready(corev1.ConditionTrue), new(ready(corev1.ConditionTrue)), ready(corev1.ConditionTrue), false},
		{"changed since written", ready(corev1.ConditionFalse), new(ready(corev1.ConditionTrue)), ready(corev1.ConditionTrue), true},
		{"the API's copy was marked not ready", ready(corev1.ConditionTrue), new(ready(corev1.ConditionTrue)), ready(corev1.ConditionFalse), true},
		{"the API's copy has not caught up with the condition", ready(corev1.ConditionTrue), new(ready(corev1.ConditionTrue)), corev1.PodStatus{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := NeedsWrite(tc.st, tc.reported, tc.api); got != tc.want {
				t.Errorf("NeedsWrite = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestReporterWrite: a status is patched once, again only when it
// changes or the API's copy disagrees, and a pod gone from the API is no
// error.
func TestReporterWrite(t *testing.T) {
	pod := testPod(corev1.RestartPolicyAlways)
	client := fake.NewClientset(pod.DeepCopy())
	r := &Reporter{Client: client}
	st := corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	patches := func() int {
		n := 0
		for _, a := range client.Actions() {
			if a.GetVerb() == "patch" && a.GetSubresource() == "status" {
				n++
			}
		}
		return n
	}
	ctx := context.Background()
	if err := r.Write(ctx, pod, st); err != nil || patches() != 1 || r.Reported() == nil {
		t.Fatalf("first write: err %v, %d patches, reported %v", err, patches(), r.Reported())
	}
	pod.Status = *st.DeepCopy() // the API's copy as the informer delivers it
	if err := r.Write(ctx, pod, st); err != nil || patches() != 1 {
		t.Fatalf("same status: err %v, %d patches, want no new one", err, patches())
	}
	pod.Status.Conditions[0].Status = corev1.ConditionFalse // the node lifecycle controller's doing
	if err := r.Write(ctx, pod, st); err != nil || patches() != 2 {
		t.Fatalf("API copy disagrees: err %v, %d patches, want a new one", err, patches())
	}
	gone := testPod(corev1.RestartPolicyAlways)
	gone.Name = "gone"
	if err := (&Reporter{Client: client}).Write(ctx, gone, st); err != nil {
		t.Fatalf("a pod gone from the API: %v", err)
	}
}
