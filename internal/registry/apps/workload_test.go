package apps

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/svcnet/svcnet/internal/apis"
	"github.com/svcnet/svcnet/internal/registry"

	. "github.com/svcnet/svcnet/internal/registry/registrytest"
)

func podTemplate() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx:1.27"}}},
	}
}

func webSelector() *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
}

func deployment(mutate func(*appsv1.Deployment)) *appsv1.Deployment {
	return Mutated(&appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec:       appsv1.DeploymentSpec{Selector: webSelector(), Template: podTemplate()},
	}, mutate)
}

func replicaSet(mutate func(*appsv1.ReplicaSet)) *appsv1.ReplicaSet {
	return Mutated(&appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web-5d8f", Namespace: "default"},
		Spec:       appsv1.ReplicaSetSpec{Selector: webSelector(), Template: podTemplate()},
	}, mutate)
}

func TestDeploymentValidate(t *testing.T) {
	rolling := func(surge, unavailable intstr.IntOrString) func(*appsv1.Deployment) {
		return func(d *appsv1.Deployment) {
			d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: &surge, MaxUnavailable: &unavailable}
		}
	}
	const ru = "spec.strategy.rollingUpdate."
	RunCreate(t, Deployment, deployment, []Case[*appsv1.Deployment]{
		{"defaulted deployment", nil, nil},
		{"name is a DNS subdomain", func(d *appsv1.Deployment) { d.Name = "web.v1" }, nil},
		{"upper-case name", func(d *appsv1.Deployment) { d.Name = "Web" }, []string{Inv("metadata.name")}},
		{"zero replicas", func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](0) }, nil},
		{"negative replicas", func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](-1) }, []string{Inv("spec.replicas")}},
		{"no selector", func(d *appsv1.Deployment) { d.Spec.Selector = nil }, []string{Req("spec.selector")}},
		{"empty selector", func(d *appsv1.Deployment) { d.Spec.Selector = &metav1.LabelSelector{} }, []string{Inv("spec.selector")}},
		{"selector does not match the template", func(d *appsv1.Deployment) { d.Spec.Selector.MatchLabels["app"] = "db" },
			[]string{Inv("spec.template.metadata.labels")}},
		{"selector by expression", func(d *appsv1.Deployment) {
			d.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"web", "api"}}}}
		}, nil},
		{"invalid selector value", func(d *appsv1.Deployment) { d.Spec.Selector.MatchLabels["app"] = "a b" },
			[]string{Inv("spec.selector.matchLabels")}},
		{"invalid template label", func(d *appsv1.Deployment) { d.Spec.Template.Labels["x/y/z"] = "1" },
			[]string{Inv("spec.template.metadata.labels")}},
		{"pods that never restart", func(d *appsv1.Deployment) { d.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever },
			[]string{Unsup("spec.template.spec.restartPolicy")}},
		{"no containers", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers = nil },
			[]string{Req("spec.template.spec.containers")}},
		{"bad container name", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Name = "Nginx" },
			[]string{Inv("spec.template.spec.containers[0].name")}},
		{"recreate", func(d *appsv1.Deployment) { d.Spec.Strategy.Type = appsv1.RecreateDeploymentStrategyType }, nil},
		{"recreate with rolling parameters", func(d *appsv1.Deployment) {
			d.Spec.Strategy.Type = appsv1.RecreateDeploymentStrategyType
			d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{}
		}, []string{Forbid("spec.strategy.rollingUpdate")}},
		{"unknown strategy", func(d *appsv1.Deployment) { d.Spec.Strategy.Type = "BlueGreen" }, []string{Unsup("spec.strategy.type")}},
		{"surge only", rolling(intstr.FromInt32(1), intstr.FromInt32(0)), nil},
		{"unavailable only, as a percentage", rolling(intstr.FromString("0%"), intstr.FromString("50%")), nil},
		{"surge above 100%", rolling(intstr.FromString("200%"), intstr.FromInt32(0)), nil},
		{"neither surge nor unavailable", rolling(intstr.FromInt32(0), intstr.FromInt32(0)), []string{Inv(ru + "maxUnavailable")}},
		{"neither, as percentages", rolling(intstr.FromString("0%"), intstr.FromInt32(0)), []string{Inv(ru + "maxUnavailable")}},
		{"negative unavailable", rolling(intstr.FromInt32(1), intstr.FromInt32(-1)), []string{Inv(ru + "maxUnavailable")}},
		{"surge not a percentage", rolling(intstr.FromString("one"), intstr.FromInt32(1)), []string{Inv(ru + "maxSurge")}},
		{"unavailable without the percent sign", rolling(intstr.FromInt32(1), intstr.FromString("10")), []string{Inv(ru + "maxUnavailable")}},
		{"unavailable above 100%", rolling(intstr.FromInt32(1), intstr.FromString("101%")), []string{Inv(ru + "maxUnavailable")}},
		{"all unavailable", rolling(intstr.FromInt32(0), intstr.FromString("100%")), nil},
		{"surge with a sign", rolling(intstr.FromString("+25%"), intstr.FromInt32(1)), []string{Inv(ru + "maxSurge")}},
		{"unavailable with a space", rolling(intstr.FromInt32(1), intstr.FromString(" 25%")), []string{Inv(ru + "maxUnavailable")}},
		{"negative surge", rolling(intstr.FromInt32(-1), intstr.FromInt32(1)), []string{Inv(ru + "maxSurge")}},
		{"unavailable without the percent sign, surge 0", rolling(intstr.FromInt32(0), intstr.FromString("10")), []string{Inv(ru + "maxUnavailable")}},
		{"neither, as zero digits", rolling(intstr.FromString("00%"), intstr.FromString("0%")), []string{Inv(ru + "maxUnavailable")}},
		{"negative minReadySeconds", func(d *appsv1.Deployment) { d.Spec.MinReadySeconds = -1 }, []string{Inv("spec.minReadySeconds")}},
		{"active deadline in the template", func(d *appsv1.Deployment) { d.Spec.Template.Spec.ActiveDeadlineSeconds = ptr.To[int64](60) },
			[]string{Forbid("spec.template.spec.activeDeadlineSeconds")}},
		{"no revision history", func(d *appsv1.Deployment) { d.Spec.RevisionHistoryLimit = ptr.To[int32](0) }, nil},
		{"negative revision history", func(d *appsv1.Deployment) { d.Spec.RevisionHistoryLimit = ptr.To[int32](-1) },
			[]string{Inv("spec.revisionHistoryLimit")}},
		{"progress deadline not above minReadySeconds", func(d *appsv1.Deployment) { d.Spec.MinReadySeconds = 600 },
			[]string{Inv("spec.progressDeadlineSeconds")}},
		{"progress deadline above minReadySeconds", func(d *appsv1.Deployment) {
			d.Spec.MinReadySeconds = 30
			d.Spec.ProgressDeadlineSeconds = ptr.To[int32](31)
		}, nil},
	})
}

func TestDeploymentValidateUpdate(t *testing.T) {
	RunUpdate(t, Deployment, deployment, []Case[*appsv1.Deployment]{
		{"scale", func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](5) }, nil},
		{"new image", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "nginx:1.28" }, nil},
		{"new labels", func(d *appsv1.Deployment) { d.Labels = map[string]string{"team": "a"} }, nil},
		{"switch to recreate", func(d *appsv1.Deployment) {
			d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
		}, nil},
		{"new selector", func(d *appsv1.Deployment) {
			d.Spec.Selector.MatchLabels["tier"] = "fe"
			d.Spec.Template.Labels["tier"] = "fe"
		}, []string{Inv("spec.selector")}},
		{"the updated object is validated too", func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](-2) },
			[]string{Inv("spec.replicas")}},
	})
}

func TestReplicaSetValidate(t *testing.T) {
	RunCreate(t, ReplicaSet, replicaSet, []Case[*appsv1.ReplicaSet]{
		{"defaulted replica set", nil, nil},
		{"negative replicas", func(rs *appsv1.ReplicaSet) { rs.Spec.Replicas = ptr.To[int32](-1) }, []string{Inv("spec.replicas")}},
		{"no selector", func(rs *appsv1.ReplicaSet) { rs.Spec.Selector = nil }, []string{Req("spec.selector")}},
		{"selector does not match the template", func(rs *appsv1.ReplicaSet) { rs.Spec.Template.Labels = map[string]string{"app": "db"} },
			[]string{Inv("spec.template.metadata.labels")}},
		{"pods restarted on failure only", func(rs *appsv1.ReplicaSet) { rs.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure },
			[]string{Unsup("spec.template.spec.restartPolicy")}},
		{"no image", func(rs *appsv1.ReplicaSet) { rs.Spec.Template.Spec.Containers[0].Image = "" },
			[]string{Req("spec.template.spec.containers[0].image")}},
		{"name with a slash", func(rs *appsv1.ReplicaSet) { rs.Name = "a/b" }, []string{Inv("metadata.name")}},
		{"negative minReadySeconds", func(rs *appsv1.ReplicaSet) { rs.Spec.MinReadySeconds = -5 }, []string{Inv("spec.minReadySeconds")}},
		{"active deadline in the template", func(rs *appsv1.ReplicaSet) { rs.Spec.Template.Spec.ActiveDeadlineSeconds = ptr.To[int64](1) },
			[]string{Forbid("spec.template.spec.activeDeadlineSeconds")}},
	})
}

func TestReplicaSetValidateUpdate(t *testing.T) {
	RunUpdate(t, ReplicaSet, replicaSet, []Case[*appsv1.ReplicaSet]{
		{"scale", func(rs *appsv1.ReplicaSet) { rs.Spec.Replicas = ptr.To[int32](0) }, nil},
		{"template", func(rs *appsv1.ReplicaSet) { rs.Spec.Template.Spec.Containers[0].Image = "nginx:1.28" }, nil},
		{"selector", func(rs *appsv1.ReplicaSet) {
			rs.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "app", Operator: metav1.LabelSelectorOpExists}}}
		}, []string{Inv("spec.selector")}},
	})
}

// workloadCase describes a kind with a spec, a status subresource and
// metadata.generation, for the shared strategy checks.
type workloadCase struct {
	kind       *registry.Kind
	object     func() runtime.Object // a valid object
	changeSpec func(runtime.Object)
	setStatus  func(runtime.Object, int32) // sets a replica count in status
	status     func(runtime.Object) int32
	specMarker func(runtime.Object) string // what changeSpec changes
}

func workloadCases() []workloadCase {
	image := func(tmpl *corev1.PodTemplateSpec) string { return tmpl.Spec.Containers[0].Image }
	return []workloadCase{
		{
			kind:       Deployment,
			object:     func() runtime.Object { return deployment(nil) },
			changeSpec: func(o runtime.Object) { o.(*appsv1.Deployment).Spec.Template.Spec.Containers[0].Image = "nginx:2" },
			setStatus:  func(o runtime.Object, n int32) { o.(*appsv1.Deployment).Status.ReadyReplicas = n },
			status:     func(o runtime.Object) int32 { return o.(*appsv1.Deployment).Status.ReadyReplicas },
			specMarker: func(o runtime.Object) string { return image(&o.(*appsv1.Deployment).Spec.Template) },
		},
		{
			kind:       ReplicaSet,
			object:     func() runtime.Object { return replicaSet(nil) },
			changeSpec: func(o runtime.Object) { o.(*appsv1.ReplicaSet).Spec.Template.Spec.Containers[0].Image = "nginx:2" },
			setStatus:  func(o runtime.Object, n int32) { o.(*appsv1.ReplicaSet).Status.Replicas = n },
			status:     func(o runtime.Object) int32 { return o.(*appsv1.ReplicaSet).Status.Replicas },
			specMarker: func(o runtime.Object) string { return image(&o.(*appsv1.ReplicaSet).Spec.Template) },
		},
		{
			kind:       StatefulSet,
			object:     func() runtime.Object { return statefulSet(nil) },
			changeSpec: func(o runtime.Object) { o.(*appsv1.StatefulSet).Spec.Template.Spec.Containers[0].Image = "nginx:2" },
			setStatus:  func(o runtime.Object, n int32) { o.(*appsv1.StatefulSet).Status.ReadyReplicas = n },
			status:     func(o runtime.Object) int32 { return o.(*appsv1.StatefulSet).Status.ReadyReplicas },
			specMarker: func(o runtime.Object) string { return image(&o.(*appsv1.StatefulSet).Spec.Template) },
		},
		{
			kind:       DaemonSet,
			object:     func() runtime.Object { return daemonSet(nil) },
			changeSpec: func(o runtime.Object) { o.(*appsv1.DaemonSet).Spec.Template.Spec.Containers[0].Image = "nginx:2" },
			setStatus:  func(o runtime.Object, n int32) { o.(*appsv1.DaemonSet).Status.NumberReady = n },
			status:     func(o runtime.Object) int32 { return o.(*appsv1.DaemonSet).Status.NumberReady },
			specMarker: func(o runtime.Object) string { return image(&o.(*appsv1.DaemonSet).Spec.Template) },
		},
	}
}

func metaOfObj(t *testing.T, obj runtime.Object) *metav1.ObjectMeta {
	t.Helper()
	m, err := metaOf(obj)
	if err == nil {
		return m
	}
	switch o := obj.(type) {
	case *appsv1.DaemonSet:
		return &o.ObjectMeta
	}
	t.Fatalf("no metadata in %T", obj)
	return nil
}

// created returns wc's object as the API server stores it after a create.
func created(t *testing.T, wc workloadCase) runtime.Object {
	t.Helper()
	obj := wc.object()
	apis.Scheme.Default(obj)
	m := metaOfObj(t, obj)
	m.Generation = 7 // clients cannot choose it
	wc.setStatus(obj, 3)
	Create(t, InNamespace("default"), wc.kind, obj)
	m.ResourceVersion = "1" // as stored
	return obj
}

func TestWorkloadPrepareForCreate(t *testing.T) {
	for _, wc := range workloadCases() {
		t.Run(wc.kind.Singular, func(t *testing.T) {
			obj := created(t, wc)
			if g := metaOfObj(t, obj).Generation; g != 1 {
				t.Errorf("generation %d after create, want 1", g)
			}
			if n := wc.status(obj); n != 0 {
				t.Errorf("status kept on create: %d", n)
			}
		})
	}
}

func TestWorkloadPrepareForUpdate(t *testing.T) {
	cases := []struct {
		name    string
		change  func(wc workloadCase, obj runtime.Object, m *metav1.ObjectMeta)
		wantGen int64
	}{
		{"spec change bumps the generation", func(wc workloadCase, obj runtime.Object, _ *metav1.ObjectMeta) { wc.changeSpec(obj) }, 2},
		{"status change is ignored", func(wc workloadCase, obj runtime.Object, _ *metav1.ObjectMeta) { wc.setStatus(obj, 9) }, 1},
		{"label change keeps the generation", func(_ workloadCase, _ runtime.Object, m *metav1.ObjectMeta) {
			m.Labels = map[string]string{"team": "a"}
		}, 1},
		{"a client-chosen generation is ignored", func(_ workloadCase, _ runtime.Object, m *metav1.ObjectMeta) { m.Generation = 42 }, 1},
	}
	for _, wc := range workloadCases() {
		for _, tc := range cases {
			t.Run(wc.kind.Singular+"/"+tc.name, func(t *testing.T) {
				old := created(t, wc)
				wc.setStatus(old, 2) // as the controller left it
				obj := old.DeepCopyObject()
				tc.change(wc, obj, metaOfObj(t, obj))
				Update(t, InNamespace("default"), wc.kind, false, obj, old)
				if g := metaOfObj(t, obj).Generation; g != tc.wantGen {
					t.Errorf("generation %d, want %d", g, tc.wantGen)
				}
				if n := wc.status(obj); n != 2 {
					t.Errorf("status %d, want the stored 2", n)
				}
			})
		}
	}
}

func TestWorkloadStatusUpdate(t *testing.T) {
	for _, wc := range workloadCases() {
		t.Run(wc.kind.Singular, func(t *testing.T) {
			old := created(t, wc)
			om := metaOfObj(t, old)
			om.Finalizers = []string{"example.com/keep"}
			om.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: "u1"}}
			obj := old.DeepCopyObject()
			wc.changeSpec(obj)
			wc.setStatus(obj, 4)
			m := metaOfObj(t, obj)
			m.Finalizers, m.OwnerReferences = nil, nil
			Update(t, InNamespace("default"), wc.kind, true, obj, old)
			if n := wc.status(obj); n != 4 {
				t.Errorf("status %d, want 4", n)
			}
			if got, want := wc.specMarker(obj), wc.specMarker(old); got != want {
				t.Errorf("spec changed through the status subresource: %q, want %q", got, want)
			}
			if m.Generation != 1 {
				t.Errorf("generation %d, want 1", m.Generation)
			}
			if len(m.Finalizers) != 1 || len(m.OwnerReferences) != 1 {
				t.Errorf("finalizers %v and owners %v changed through the status subresource", m.Finalizers, m.OwnerReferences)
			}
		})
	}
}

func TestWorkloadResetFields(t *testing.T) {
	for _, wc := range workloadCases() {
		t.Run(wc.kind.Singular, func(t *testing.T) {
			main := registry.NewStrategy(wc.kind).GetResetFields()["apps/v1"]
			if main == nil || !main.Has(fieldpath.MakePathOrDie("status")) || main.Has(fieldpath.MakePathOrDie("spec")) {
				t.Errorf("main resource resets %v, want status only", main)
			}
			status := (&registry.StatusStrategy{Strategy: registry.NewStrategy(wc.kind)}).GetResetFields()["apps/v1"]
			for _, p := range []fieldpath.Path{fieldpath.MakePathOrDie("spec"), fieldpath.MakePathOrDie("metadata", "finalizers")} {
				if status == nil || !status.Has(p) {
					t.Errorf("status subresource does not reset %v: %v", p, status)
				}
			}
			if status.Has(fieldpath.MakePathOrDie("status")) {
				t.Errorf("status subresource resets status")
			}
		})
	}
}

func TestDeploymentTable(t *testing.T) {
	cols := []string{"Name", "Ready", "Up-to-date", "Available", "Age", "Containers*", "Images*", "Selector*"}
	cases := []struct {
		name   string
		mutate func(*appsv1.Deployment)
		want   []any
	}{
		{"rolling out", func(d *appsv1.Deployment) {
			d.Spec.Replicas = ptr.To[int32](3)
			d.Status = appsv1.DeploymentStatus{ReadyReplicas: 2, UpdatedReplicas: 1, AvailableReplicas: 2}
		}, []any{"web", "2/3", int64(1), int64(2), "2d", "nginx", "nginx:1.27", "app=web"}},
		{"two containers", func(d *appsv1.Deployment) {
			d.Spec.Replicas = ptr.To[int32](1)
			d.Spec.Template.Spec.Containers = append(d.Spec.Template.Spec.Containers, corev1.Container{Name: "log", Image: "busybox"})
		}, []any{"web", "0/1", int64(0), int64(0), "2d", "nginx,log", "nginx:1.27,busybox", "app=web"}},
		{"selector by expression", func(d *appsv1.Deployment) {
			d.Spec.Replicas = ptr.To[int32](0)
			d.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"web"}}}}
		}, []any{"web", "0/0", int64(0), int64(0), "2d", "nginx", "nginx:1.27", "app in (web)"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := deployment(tc.mutate)
			d.CreationTimestamp = TwoDaysAgo()
			c, row := TableOf(t, Deployment, d)
			CheckRow(t, c, row, cols, tc.want)
		})
	}
}

func TestReplicaSetTableAndFields(t *testing.T) {
	rs := replicaSet(func(rs *appsv1.ReplicaSet) {
		rs.Spec.Replicas = ptr.To[int32](3)
		rs.Status = appsv1.ReplicaSetStatus{Replicas: 2, ReadyReplicas: 1}
		rs.CreationTimestamp = TwoDaysAgo()
	})
	c, row := TableOf(t, ReplicaSet, rs)
	CheckRow(t, c, row, []string{"Name", "Desired", "Current", "Ready", "Age", "Containers*", "Images*", "Selector*"},
		[]any{"web-5d8f", int64(3), int64(2), int64(1), "2d", "nginx", "nginx:1.27", "app=web"})

	_, fs, err := ReplicaSet.AttrFunc(rs)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"metadata.name": "web-5d8f", "metadata.namespace": "default", "status.replicas": "2"}
	if len(fs) != len(want) {
		t.Errorf("fields %v, want %v", fs, want)
	}
	for k, v := range want {
		if fs[k] != v {
			t.Errorf("field %s = %q, want %q", k, fs[k], v)
		}
	}
	for sel, match := range map[string]bool{"status.replicas=2": true, "status.replicas=3": false, "status.replicas!=0": true} {
		pred := ReplicaSet.Predicate(labels.Everything(), fields.ParseSelectorOrDie(sel))
		ok, err := pred.Matches(rs)
		if err != nil || ok != match {
			t.Errorf("%s matches: %v, %v; want %v", sel, ok, err, match)
		}
	}
}
