package nodelifecycle

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/svcnet/svcnet/internal/controller"
)

func nodeWith(ready corev1.ConditionStatus, taints ...corev1.Taint) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Spec: corev1.NodeSpec{Taints: taints}}
	if ready != "" {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}
	}
	return n
}

func TestTaints(t *testing.T) {
	other := corev1.Taint{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}
	now := metav1.Now()
	cases := []struct {
		name string
		node *corev1.Node
		want []corev1.Taint
	}{
		{"ready", nodeWith(corev1.ConditionTrue, other), []corev1.Taint{other}},
		{"no condition yet", nodeWith(""), nil},
		{"unknown", nodeWith(corev1.ConditionUnknown, other), append([]corev1.Taint{other}, unreachable...)},
		{"not ready", nodeWith(corev1.ConditionFalse), notReady},
		{"ready again", nodeWith(corev1.ConditionTrue, append([]corev1.Taint{other}, unreachable...)...), []corev1.Taint{other}},
		{"unknown after not ready", nodeWith(corev1.ConditionUnknown, notReady...), unreachable},
		{"already tainted", nodeWith(corev1.ConditionUnknown, unreachable...), unreachable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Taints(tc.node, now)
			if !sameTaints(got, tc.want) {
				t.Fatalf("taints %v, want %v", got, tc.want)
			}
			for _, tn := range got {
				if tn.Effect == corev1.TaintEffectNoExecute && !hasTaint(tc.node.Spec.Taints, tn) && tn.TimeAdded == nil {
					t.Errorf("%s has no timeAdded", tn.Key)
				}
			}
		})
	}
}

func TestUnknownConditions(t *testing.T) {
	then, now := metav1.NewTime(time.Unix(100, 0)), metav1.NewTime(time.Unix(200, 0))
	cases := []struct {
		name      string
		in        []corev1.NodeCondition
		wantTypes []corev1.NodeConditionType
		moved     bool // Ready's transition time becomes now
	}{
		{"kubelet's four", []corev1.NodeCondition{
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, LastHeartbeatTime: then},
			{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse},
			{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse},
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: then, LastTransitionTime: then}},
			[]corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure, corev1.NodeReady}, true},
		{"none posted", nil, []corev1.NodeConditionType{corev1.NodeReady}, true},
		{"already unknown", []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, LastTransitionTime: then}},
			[]corev1.NodeConditionType{corev1.NodeReady}, false},
		{"other types kept as they are", []corev1.NodeCondition{{Type: "NetworkUnavailable", Status: corev1.ConditionFalse},
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			[]corev1.NodeConditionType{"NetworkUnavailable", corev1.NodeReady}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]corev1.NodeCondition(nil), tc.in...)
			out := UnknownConditions(tc.in, now)
			if len(out) != len(tc.wantTypes) {
				t.Fatalf("conditions %v", out)
			}
			for i, c := range out {
				if c.Type != tc.wantTypes[i] {
					t.Fatalf("condition %d is %s, want %s", i, c.Type, tc.wantTypes[i])
				}
				if c.Type == "NetworkUnavailable" {
					if c.Status != corev1.ConditionFalse {
						t.Errorf("NetworkUnavailable changed: %v", c)
					}
					continue
				}
				if c.Status != corev1.ConditionUnknown || c.Reason != "NodeStatusUnknown" {
					t.Errorf("%s: %s %s", c.Type, c.Status, c.Reason)
				}
				if c.Type == corev1.NodeReady && c.LastTransitionTime.Equal(&now) != tc.moved {
					t.Errorf("Ready transition time %v (moved: want %v)", c.LastTransitionTime, tc.moved)
				}
				if c.Type == corev1.NodeMemoryPressure && !c.LastHeartbeatTime.Equal(&then) {
					t.Errorf("heartbeat time changed to %v", c.LastHeartbeatTime)
				}
			}
			for i := range in {
				if in[i].Status != tc.in[i].Status {
					t.Errorf("input changed")
				}
			}
		})
	}
}

// TestSilentNode runs the controller on a fake clientset: a node whose
// Lease stops being renewed for longer than the grace period becomes
// Unknown and tainted and its ready pods unready; the node whose Lease is
// renewed is left alone; when the silent node posts Ready again, the
// taints go.
func TestSilentNode(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	t0 := time.Now()
	heartbeat := metav1.NewTime(t0)
	node := func(name string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: heartbeat, LastTransitionTime: heartbeat}}}}
	}
	lease := func(name string, at time.Time) *coordinationv1.Lease {
		mt := metav1.NewMicroTime(at)
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: corev1.NamespaceNodeLease, Name: name},
			Spec: coordinationv1.LeaseSpec{RenewTime: &mt}}
	}
	pod := func(name, nodeName string, tolerationSeconds int64) *corev1.Pod {
		var tols []corev1.Toleration
		for _, key := range []string{corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable} {
			tols = append(tols, corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute,
				TolerationSeconds: &tolerationSeconds})
		}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: corev1.PodSpec{NodeName: nodeName, Tolerations: tols},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	}
	// The API server gives pods 300 s (DefaultTolerationSeconds); one
	// pod asks for 10.
	client := fake.NewClientset(node("alive"), node("silent"), lease("alive", t0), lease("silent", t0),
		pod("on-alive", "alive", 300), pod("on-silent", "silent", 300), pod("impatient", "silent", 10))
	factory := informers.NewSharedInformerFactory(client, 0)
	const grace = 40 * time.Second
	c := New(client, factory, record.NewFakeRecorder(100), grace)
	clock := t0
	c.now = func() time.Time { return clock }
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	c.Sync(ctx) // first sight: every node gets the whole grace period
	clock = t0.Add(grace / 2)
	renew(t, ctx, c, client, lease("alive", clock))
	c.Sync(ctx)
	clock = t0.Add(grace + time.Second)
	c.Sync(ctx)

	get := func(name string) *corev1.Node {
		n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if r := readyCondition(get("silent")); r.Status != corev1.ConditionUnknown || r.Reason != "NodeStatusUnknown" {
		t.Errorf("silent node's Ready: %+v", r)
	}
	if !sameTaints(get("silent").Spec.Taints, unreachable) {
		t.Errorf("silent node's taints: %v", get("silent").Spec.Taints)
	}
	if r := readyCondition(get("alive")); r.Status != corev1.ConditionTrue || len(get("alive").Spec.Taints) != 0 {
		t.Errorf("alive node changed: %+v, taints %v", r, get("alive").Spec.Taints)
	}
	podReadyNow := func(name string) bool {
		p, err := client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return controller.PodReady(p)
	}
	if podReadyNow("on-silent") || !podReadyNow("on-alive") {
		t.Errorf("pods ready: on-silent %v (want false), on-alive %v (want true)", podReadyNow("on-silent"), podReadyNow("on-alive"))
	}

	// The impatient pod's 10 s run out; the others' 300 s do not.
	exists := func(name string) bool {
		_, err := client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		return err == nil
	}
	if !exists("impatient") {
		t.Fatal("impatient evicted before its 10 s")
	}
	waitFor(t, func() bool {
		n, err := c.nodes.Get("silent")
		return err == nil && len(n.Spec.Taints) == 2
	})
	clock = clock.Add(11 * time.Second)
	c.Sync(ctx)
	if exists("impatient") || !exists("on-silent") || !exists("on-alive") {
		t.Errorf("after 11 s: impatient %v (want gone), on-silent %v, on-alive %v", exists("impatient"), exists("on-silent"), exists("on-alive"))
	}

	// The agent comes back and posts Ready.
	back := get("silent")
	back.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.NewTime(clock)}}
	if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, back, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		n, err := c.nodes.Get("silent")
		return err == nil && readyCondition(n).Status == corev1.ConditionTrue
	})
	c.Sync(ctx)
	if ts := get("silent").Spec.Taints; len(ts) != 0 {
		t.Errorf("taints after the node is back: %v", ts)
	}
	if r := readyCondition(get("silent")); r.Status != corev1.ConditionTrue {
		t.Errorf("the node's own Ready was overwritten: %+v", r)
	}
}

// renew updates a Lease and waits until the controller's cache has it.
func renew(t *testing.T, ctx context.Context, c *Controller, client *fake.Clientset, l *coordinationv1.Lease) {
	t.Helper()
	if _, err := client.CoordinationV1().Leases(l.Namespace).Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		got, err := c.leases.Leases(l.Namespace).Get(l.Name)
		return err == nil && got.Spec.RenewTime.Equal(l.Spec.RenewTime)
	})
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the informer cache did not catch up in 5 s")
		}
	}
}

func TestEvictionTime(t *testing.T) {
	added := time.Unix(1000, 0)
	now := added.Add(10 * time.Second)
	unreachableNoExec := corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute, TimeAdded: &metav1.Time{Time: added}}
	noSchedule := corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule}
	other := corev1.Taint{Key: "maintenance", Effect: corev1.TaintEffectNoExecute}
	secs := func(n int64) *int64 { return &n }
	tol := func(key string, seconds *int64) corev1.Toleration {
		return corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: seconds}
	}
	cases := []struct {
		name   string
		tols   []corev1.Toleration
		taints []corev1.Taint
		at     time.Time
		ok     bool
	}{
		{"no NoExecute taint", nil, []corev1.Taint{noSchedule}, time.Time{}, false},
		{"not tolerated: at once", nil, []corev1.Taint{unreachableNoExec}, now, true},
		{"default 300 s from first sight", []corev1.Toleration{tol(corev1.TaintNodeUnreachable, secs(300))},
			[]corev1.Taint{unreachableNoExec}, added.Add(300 * time.Second), true},
		{"tolerated for good", []corev1.Toleration{tol(corev1.TaintNodeUnreachable, nil)}, []corev1.Taint{unreachableNoExec}, time.Time{}, false},
		{"for good and 60 s: 60 s counts", []corev1.Toleration{tol(corev1.TaintNodeUnreachable, nil), tol(corev1.TaintNodeUnreachable, secs(60))},
			[]corev1.Taint{unreachableNoExec}, added.Add(time.Minute), true},
		{"everything tolerated", []corev1.Toleration{{Operator: corev1.TolerationOpExists}}, []corev1.Taint{unreachableNoExec, other}, time.Time{}, false},
		{"a second taint not tolerated", []corev1.Toleration{tol(corev1.TaintNodeUnreachable, secs(300))},
			[]corev1.Taint{unreachableNoExec, other}, now, true},
		{"the shortest of two taints, no time on the second", []corev1.Toleration{tol(corev1.TaintNodeUnreachable, secs(300)), tol("maintenance", secs(5))},
			[]corev1.Taint{unreachableNoExec, other}, now.Add(5 * time.Second), true},
		{"negative seconds: at once", []corev1.Toleration{tol(corev1.TaintNodeUnreachable, secs(-1))},
			[]corev1.Taint{unreachableNoExec}, added, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: corev1.PodSpec{Tolerations: tc.tols}}
			// The pod was first seen with a taint at its timeAdded, or now.
			since := func(t corev1.Taint) time.Time {
				if t.TimeAdded != nil {
					return t.TimeAdded.Time
				}
				return now
			}
			at, ok := EvictionTime(pod, tc.taints, now, since)
			if ok != tc.ok || !at.Equal(tc.at) {
				t.Errorf("EvictionTime = %v %v, want %v %v", at, ok, tc.at, tc.ok)
			}
		})
	}
}
