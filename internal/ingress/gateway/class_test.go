package gateway

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// pending is the condition the CRD's default puts on a new class.
var pending = metav1.Condition{Type: "Accepted", Status: metav1.ConditionUnknown, Reason: "Pending",
	Message: "Waiting for controller", LastTransitionTime: metav1.Unix(0, 0)}

func class(gen int64, params *gatewayv1.ParametersReference, conds ...metav1.Condition) *gatewayv1.GatewayClass {
	gc := &gatewayv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: "svcnet", Generation: gen},
		Spec:       gatewayv1.GatewayClassSpec{ControllerName: ControllerName, ParametersRef: params},
	}
	gc.Status.Conditions = conds
	return gc
}

func TestClassStatus(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	earlier := metav1.NewTime(now.Add(-time.Hour))
	params := &gatewayv1.ParametersReference{Group: "example.com", Kind: "Config", Name: "c"}
	other := metav1.Condition{Type: "example.com/Audited", Status: metav1.ConditionTrue, Reason: "Audited", LastTransitionTime: earlier}
	tests := []struct {
		name   string
		gc     *gatewayv1.GatewayClass
		ok     bool
		status metav1.ConditionStatus
		reason string
		since  metav1.Time // the Accepted condition's transition time
		others []metav1.Condition
	}{
		{name: "new class: accepted", gc: class(1, nil, pending), ok: true,
			status: metav1.ConditionTrue, reason: "Accepted", since: now},
		{name: "no conditions yet: accepted", gc: class(1, nil), ok: true,
			status: metav1.ConditionTrue, reason: "Accepted", since: now},
		{name: "already accepted: transition time kept", ok: true,
			gc:     class(3, nil, metav1.Condition{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", ObservedGeneration: 2, LastTransitionTime: earlier}),
			status: metav1.ConditionTrue, reason: "Accepted", since: earlier},
		{name: "parametersRef: not accepted", gc: class(2, params, pending), ok: true,
			status: metav1.ConditionFalse, reason: "InvalidParameters", since: now},
		{name: "parametersRef removed: accepted again", ok: true,
			gc:     class(3, nil, metav1.Condition{Type: "Accepted", Status: metav1.ConditionFalse, Reason: "InvalidParameters", ObservedGeneration: 2, LastTransitionTime: earlier}),
			status: metav1.ConditionTrue, reason: "Accepted", since: now},
		{name: "another controller's condition kept", gc: class(1, nil, other, pending), ok: true,
			status: metav1.ConditionTrue, reason: "Accepted", since: now, others: []metav1.Condition{other}},
		{name: "written for a newer generation: stale cache, not written",
			gc: class(1, nil, metav1.Condition{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", ObservedGeneration: 2, LastTransitionTime: earlier}),
			ok: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.gc.DeepCopy()
			st, ok := ClassStatus(tt.gc, now)
			if !equality.Semantic.DeepEqual(before, tt.gc) {
				t.Error("the class was modified")
			}
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v", ok, tt.ok)
			}
			if !ok {
				if !equality.Semantic.DeepEqual(st, tt.gc.Status) {
					t.Errorf("not ok, yet status changed: %+v", st)
				}
				return
			}
			c := meta.FindStatusCondition(st.Conditions, "Accepted")
			if c == nil {
				t.Fatalf("no Accepted condition in %+v", st.Conditions)
			}
			if c.Status != tt.status || c.Reason != tt.reason || c.ObservedGeneration != tt.gc.Generation || !c.LastTransitionTime.Equal(&tt.since) || c.Message == "" {
				t.Errorf("Accepted = %+v, want %s/%s at generation %d since %v, with a message", c, tt.status, tt.reason, tt.gc.Generation, tt.since)
			}
			if len(st.Conditions) != 1+len(tt.others) {
				t.Errorf("conditions %+v, want Accepted and %+v", st.Conditions, tt.others)
			}
			for _, o := range tt.others {
				if got := meta.FindStatusCondition(st.Conditions, o.Type); got == nil || *got != o {
					t.Errorf("condition %s = %+v, want it kept as %+v", o.Type, got, o)
				}
			}
			if !equality.Semantic.DeepEqual(st.SupportedFeatures, SupportedFeatures()) {
				t.Errorf("supportedFeatures %v, want %v", st.SupportedFeatures, SupportedFeatures())
			}
			// Computing again from the result changes nothing: the
			// controller writes only when the status differs.
			again := tt.gc.DeepCopy()
			again.Status = st
			st2, _ := ClassStatus(again, metav1.NewTime(now.Add(time.Minute)))
			if !equality.Semantic.DeepEqual(st, st2) {
				t.Errorf("not stable:\n%+v\n%+v", st, st2)
			}
		})
	}
}

func TestServes(t *testing.T) {
	gc := class(1, nil)
	if !Serves(gc, ControllerName) {
		t.Error("our class not served")
	}
	if Serves(gc, "example.com/other") {
		t.Error("served for another controller")
	}
	if Serves(gc, "") {
		t.Error("served with the controller off")
	}
}
