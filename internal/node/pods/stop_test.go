package pods

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func TestStopRunsPreStopFirst(t *testing.T) {
	sleep := func(s int64) *corev1.Lifecycle {
		return &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: s}}}
	}
	execHook := &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"drain"}}}}
	cases := []struct {
		name      string
		lifecycle *corev1.Lifecycle
		grace     time.Duration
		execCode  int
		// the stop (SIGTERM) comes after at least wait, with a grace of
		// about graceLeft, and these events
		wait, graceLeft time.Duration
		event           string
	}{
		{"no hook: SIGTERM at once with the whole grace", nil, 3 * time.Second, 0, 0, 3 * time.Second, ""},
		{"sleep hook delays SIGTERM", sleep(1), 3 * time.Second, 0, time.Second, 2 * time.Second, ""},
		{"a hook longer than grace is cut, then 2 s more", sleep(10), time.Second, 0, time.Second, hookGraceExtension, ""},
		{"grace 0 skips the hook", sleep(10), 0, 0, 0, 0, ""},
		{"exec hook runs in the pod", execHook, 3 * time.Second, 0, 0, 3 * time.Second, ""},
		{"a failing hook is an event, the stop goes on", execHook, 3 * time.Second, 1, 0, 3 * time.Second, "FailedPreStopHook"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var ran [][]string
			var events []string
			sp := stopPlan{
				spec: &corev1.Container{Name: "c", Lifecycle: tc.lifecycle},
				exec: func(cmd []string, _ time.Duration) ([]byte, int, error) {
					ran = append(ran, cmd)
					return []byte("out"), tc.execCode, nil
				},
				event: func(reason, msg string) { events = append(events, reason+": "+msg) },
			}
			start := time.Now()
			var at time.Time
			var got time.Duration
			sp.stop(func(grace time.Duration) { at, got = time.Now(), grace }, tc.grace)
			if at.IsZero() {
				t.Fatal("process never stopped")
			}
			if waited := at.Sub(start); waited < tc.wait || waited > tc.wait+2*time.Second {
				t.Errorf("SIGTERM after %s, want %s", waited, tc.wait)
			}
			if d := got - tc.graceLeft; d > 100*time.Millisecond || d < -500*time.Millisecond {
				t.Errorf("grace left %s, want about %s", got, tc.graceLeft)
			}
			if tc.lifecycle == execHook && (len(ran) != 1 || ran[0][0] != "drain") {
				t.Errorf("exec hook ran %v", ran)
			}
			if joined := strings.Join(events, "\n"); (tc.event == "") != (joined == "") || !strings.Contains(joined, tc.event) {
				t.Errorf("events %q, want %q", joined, tc.event)
			}
		})
	}
}
