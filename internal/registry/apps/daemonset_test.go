package apps

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	. "github.com/svcnet/svcnet/internal/registry/registrytest"
)

func daemonSet(mutate func(*appsv1.DaemonSet)) *appsv1.DaemonSet {
	return Mutated(&appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "default"},
		Spec:       appsv1.DaemonSetSpec{Selector: webSelector(), Template: podTemplate()},
	}, mutate)
}

func TestDaemonSetDefaults(t *testing.T) {
	d := daemonSet(nil)
	if errs := ValidateCreate(DaemonSet, d); len(errs) > 0 {
		t.Fatal(errs)
	}
	ru := d.Spec.UpdateStrategy.RollingUpdate
	if d.Spec.UpdateStrategy.Type != appsv1.RollingUpdateDaemonSetStrategyType || ru == nil ||
		ru.MaxUnavailable.String() != "1" || ru.MaxSurge.String() != "0" {
		t.Errorf("update strategy %+v, want RollingUpdate with maxUnavailable 1, maxSurge 0", d.Spec.UpdateStrategy)
	}
	if d.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		t.Errorf("template restart policy %q", d.Spec.Template.Spec.RestartPolicy)
	}
}

func TestDaemonSetValidate(t *testing.T) {
	rolling := func(unavailable, surge intstr.IntOrString) func(*appsv1.DaemonSet) {
		return func(d *appsv1.DaemonSet) {
			d.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateDaemonSet{MaxUnavailable: &unavailable, MaxSurge: &surge}
		}
	}
	const ru = "spec.updateStrategy.rollingUpdate."
	RunCreate(t, DaemonSet, daemonSet, []Case[*appsv1.DaemonSet]{
		{"defaulted daemon set", nil, nil},
		{"on delete", func(d *appsv1.DaemonSet) { d.Spec.UpdateStrategy.Type = appsv1.OnDeleteDaemonSetStrategyType }, nil},
		{"unknown update strategy", func(d *appsv1.DaemonSet) { d.Spec.UpdateStrategy.Type = "Sometimes" },
			[]string{Unsup("spec.updateStrategy.type")}},
		{"surge instead of unavailability", rolling(intstr.FromInt32(0), intstr.FromInt32(1)), nil},
		{"percentages", rolling(intstr.FromString("0%"), intstr.FromString("10%")), nil},
		{"neither surge nor unavailability", rolling(intstr.FromInt32(0), intstr.FromInt32(0)), []string{Req(ru + "maxUnavailable")}},
		{"neither, as percentages", rolling(intstr.FromString("0%"), intstr.FromString("0%")), []string{Req(ru + "maxUnavailable")}},
		{"both surge and unavailability", rolling(intstr.FromInt32(1), intstr.FromString("10%")), []string{Inv(ru + "maxSurge")}},
		{"negative unavailability", rolling(intstr.FromInt32(-1), intstr.FromInt32(0)), []string{Inv(ru + "maxUnavailable")}},
		{"negative surge", rolling(intstr.FromInt32(0), intstr.FromInt32(-2)), []string{Inv(ru + "maxSurge")}},
		{"unavailability not a percentage", rolling(intstr.FromString("ten"), intstr.FromInt32(0)),
			[]string{Inv(ru + "maxUnavailable"), Req(ru + "maxUnavailable")}},
		{"surge with a sign", rolling(intstr.FromInt32(0), intstr.FromString("+10%")), []string{Inv(ru + "maxSurge"), Req(ru + "maxUnavailable")}},
		{"unavailability above 100%", rolling(intstr.FromString("101%"), intstr.FromInt32(0)), []string{Inv(ru + "maxUnavailable")}},
		{"surge above 100%", rolling(intstr.FromInt32(0), intstr.FromString("150%")), []string{Inv(ru + "maxSurge")}},
		{"all unavailable", rolling(intstr.FromString("100%"), intstr.FromInt32(0)), nil},
		{"on delete ignores rolling parameters", func(d *appsv1.DaemonSet) {
			d.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromInt32(0))}}
		}, nil},
		{"negative minReadySeconds", func(d *appsv1.DaemonSet) { d.Spec.MinReadySeconds = -1 }, []string{Inv("spec.minReadySeconds")}},
		{"no revision history", func(d *appsv1.DaemonSet) { d.Spec.RevisionHistoryLimit = ptr.To[int32](0) }, nil},
		{"negative revision history", func(d *appsv1.DaemonSet) { d.Spec.RevisionHistoryLimit = ptr.To[int32](-1) },
			[]string{Inv("spec.revisionHistoryLimit")}},
		{"active deadline in the template", func(d *appsv1.DaemonSet) { d.Spec.Template.Spec.ActiveDeadlineSeconds = ptr.To[int64](60) },
			[]string{Forbid("spec.template.spec.activeDeadlineSeconds")}},
		{"no selector", func(d *appsv1.DaemonSet) { d.Spec.Selector = nil }, []string{Req("spec.selector")}},
		{"selector does not match the template", func(d *appsv1.DaemonSet) { d.Spec.Template.Labels = map[string]string{"app": "other"} },
			[]string{Inv("spec.template.metadata.labels")}},
		{"pods restarted on failure only", func(d *appsv1.DaemonSet) { d.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure },
			[]string{Unsup("spec.template.spec.restartPolicy")}},
		{"bad node selector", func(d *appsv1.DaemonSet) { d.Spec.Template.Spec.NodeSelector = map[string]string{"a b": "c"} },
			[]string{Inv("spec.template.spec.nodeSelector")}},
		{"bad name", func(d *appsv1.DaemonSet) { d.Name = "agent_1" }, []string{Inv("metadata.name")}},
	})
}

func TestDaemonSetValidateUpdate(t *testing.T) {
	RunUpdate(t, DaemonSet, daemonSet, []Case[*appsv1.DaemonSet]{
		{"template", func(d *appsv1.DaemonSet) { d.Spec.Template.Spec.Containers[0].Image = "nginx:1.28" }, nil},
		{"update strategy", func(d *appsv1.DaemonSet) {
			d.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}
		}, nil},
		{"selector", func(d *appsv1.DaemonSet) {
			d.Spec.Selector.MatchLabels["tier"] = "node"
			d.Spec.Template.Labels["tier"] = "node"
		}, []string{Inv("spec.selector")}},
	})
}

func TestDaemonSetTable(t *testing.T) {
	cols := []string{"Name", "Desired", "Current", "Ready", "Up-to-date", "Available", "Node Selector", "Age", "Containers*", "Images*"}
	status := appsv1.DaemonSetStatus{DesiredNumberScheduled: 3, CurrentNumberScheduled: 3, NumberReady: 2, UpdatedNumberScheduled: 1, NumberAvailable: 2}
	cases := []struct {
		name         string
		nodeSelector map[string]string
		want         string
	}{
		{"every node", nil, "<none>"},
		{"linux nodes", map[string]string{corev1.LabelOSStable: "linux"}, "kubernetes.io/os=linux"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := daemonSet(func(d *appsv1.DaemonSet) {
				d.Spec.Template.Spec.NodeSelector = tc.nodeSelector
				d.Status = status
				d.CreationTimestamp = TwoDaysAgo()
			})
			c, row := TableOf(t, DaemonSet, d)
			CheckRow(t, c, row, cols, []any{"agent", int64(3), int64(3), int64(2), int64(1), int64(2), tc.want, "2d", "nginx", "nginx:1.27"})
		})
	}
}
