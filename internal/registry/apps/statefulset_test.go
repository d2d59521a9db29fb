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

func statefulSet(mutate func(*appsv1.StatefulSet)) *appsv1.StatefulSet {
	return Mutated(&appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default"},
		Spec:       appsv1.StatefulSetSpec{ServiceName: "db", Selector: webSelector(), Template: podTemplate()},
	}, mutate)
}

func TestStatefulSetDefaults(t *testing.T) {
	s := statefulSet(nil)
	if errs := ValidateCreate(StatefulSet, s); len(errs) > 0 {
		t.Fatal(errs)
	}
	if ptr.Deref(s.Spec.Replicas, -1) != 1 || s.Spec.PodManagementPolicy != appsv1.OrderedReadyPodManagement ||
		s.Spec.UpdateStrategy.Type != appsv1.RollingUpdateStatefulSetStrategyType ||
		s.Spec.UpdateStrategy.RollingUpdate == nil || ptr.Deref(s.Spec.UpdateStrategy.RollingUpdate.Partition, -1) != 0 ||
		ptr.Deref(s.Spec.RevisionHistoryLimit, -1) != 10 {
		t.Errorf("defaults %+v", s.Spec)
	}
}

func TestStatefulSetValidate(t *testing.T) {
	const ru = "spec.updateStrategy.rollingUpdate."
	maxUnavailable := func(v intstr.IntOrString) func(*appsv1.StatefulSet) {
		return func(s *appsv1.StatefulSet) {
			s.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{MaxUnavailable: &v}
		}
	}
	RunCreate(t, StatefulSet, statefulSet, []Case[*appsv1.StatefulSet]{
		{"defaulted stateful set", nil, nil},
		// Pod hostnames are <name>-<ordinal>: the name must be a DNS label.
		{"name with a dot", func(s *appsv1.StatefulSet) { s.Name = "db.v1" }, []string{Inv("metadata.name")}},
		{"parallel", func(s *appsv1.StatefulSet) { s.Spec.PodManagementPolicy = appsv1.ParallelPodManagement }, nil},
		{"unknown pod management", func(s *appsv1.StatefulSet) { s.Spec.PodManagementPolicy = "Random" },
			[]string{Unsup("spec.podManagementPolicy")}},
		{"on delete", func(s *appsv1.StatefulSet) { s.Spec.UpdateStrategy.Type = appsv1.OnDeleteStatefulSetStrategyType }, nil},
		{"on delete with rolling parameters", func(s *appsv1.StatefulSet) {
			s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{}}
		}, []string{Inv("spec.updateStrategy.rollingUpdate")}},
		{"unknown update strategy", func(s *appsv1.StatefulSet) { s.Spec.UpdateStrategy.Type = "Canary" },
			[]string{Unsup("spec.updateStrategy.type")}},
		{"partition", func(s *appsv1.StatefulSet) {
			s.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](2)}
		}, nil},
		{"negative partition", func(s *appsv1.StatefulSet) {
			s.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](-1)}
		}, []string{Inv(ru + "partition")}},
		{"two unavailable", maxUnavailable(intstr.FromInt32(2)), nil},
		{"half unavailable", maxUnavailable(intstr.FromString("50%")), nil},
		{"none unavailable", maxUnavailable(intstr.FromInt32(0)), []string{Inv(ru + "maxUnavailable")}},
		{"none unavailable, as a percentage", maxUnavailable(intstr.FromString("0%")), []string{Inv(ru + "maxUnavailable")}},
		{"none unavailable, as digits", maxUnavailable(intstr.FromString("00%")), []string{Inv(ru + "maxUnavailable")}},
		{"negative unavailable", maxUnavailable(intstr.FromInt32(-1)), []string{Inv(ru + "maxUnavailable")}},
		{"all unavailable", maxUnavailable(intstr.FromString("100%")), nil},
		{"more than all unavailable", maxUnavailable(intstr.FromString("101%")), []string{Inv(ru + "maxUnavailable")}},
		{"unavailable not a percentage", maxUnavailable(intstr.FromString("half")),
			[]string{Inv(ru + "maxUnavailable"), Inv(ru + "maxUnavailable")}}, // not a percentage, and 0
		{"active deadline in the template", func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.ActiveDeadlineSeconds = ptr.To[int64](60) },
			[]string{Forbid("spec.template.spec.activeDeadlineSeconds")}},
		{"volume claim templates", func(s *appsv1.StatefulSet) {
			s.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}}
		}, []string{Forbid("spec.volumeClaimTemplates")}},
		{"ordinals from 5", func(s *appsv1.StatefulSet) { s.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: 5} }, nil},
		{"negative ordinals", func(s *appsv1.StatefulSet) { s.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: -1} },
			[]string{Inv("spec.ordinals.start")}},
		{"negative revision history", func(s *appsv1.StatefulSet) { s.Spec.RevisionHistoryLimit = ptr.To[int32](-1) },
			[]string{Inv("spec.revisionHistoryLimit")}},
		{"negative minReadySeconds", func(s *appsv1.StatefulSet) { s.Spec.MinReadySeconds = -1 },
			[]string{Inv("spec.minReadySeconds")}},
		{"negative replicas", func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr.To[int32](-1) }, []string{Inv("spec.replicas")}},
		{"no selector", func(s *appsv1.StatefulSet) { s.Spec.Selector = nil }, []string{Req("spec.selector")}},
		{"pods that never restart", func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever },
			[]string{Unsup("spec.template.spec.restartPolicy")}},
	})
}

func TestStatefulSetValidateUpdate(t *testing.T) {
	forbidden := Forbid("spec")
	RunUpdate(t, StatefulSet, statefulSet, []Case[*appsv1.StatefulSet]{
		{"replicas", func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr.To[int32](3) }, nil},
		{"template", func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.Containers[0].Image = "postgres:17" }, nil},
		{"update strategy", func(s *appsv1.StatefulSet) {
			s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
		}, nil},
		{"minReadySeconds", func(s *appsv1.StatefulSet) { s.Spec.MinReadySeconds = 10 }, nil},
		{"ordinals", func(s *appsv1.StatefulSet) { s.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: 1} }, nil},
		{"revision history", func(s *appsv1.StatefulSet) { s.Spec.RevisionHistoryLimit = ptr.To[int32](3) }, nil},
		{"claim retention", func(s *appsv1.StatefulSet) {
			s.Spec.PersistentVolumeClaimRetentionPolicy.WhenScaled = appsv1.DeletePersistentVolumeClaimRetentionPolicyType
		}, nil},
		{"service name", func(s *appsv1.StatefulSet) { s.Spec.ServiceName = "db-headless" }, []string{forbidden}},
		{"pod management", func(s *appsv1.StatefulSet) { s.Spec.PodManagementPolicy = appsv1.ParallelPodManagement }, []string{forbidden}},
		{"selector", func(s *appsv1.StatefulSet) {
			s.Spec.Selector.MatchLabels["tier"] = "db"
			s.Spec.Template.Labels["tier"] = "db"
		}, []string{forbidden}},
	})
}

func TestStatefulSetTable(t *testing.T) {
	s := statefulSet(func(s *appsv1.StatefulSet) {
		s.Spec.Replicas = ptr.To[int32](3)
		s.Status.ReadyReplicas = 1
		s.CreationTimestamp = TwoDaysAgo()
	})
	c, row := TableOf(t, StatefulSet, s)
	CheckRow(t, c, row, []string{"Name", "Ready", "Age", "Containers*", "Images*"}, []any{"db", "1/3", "2d", "nginx", "nginx:1.27"})
}
