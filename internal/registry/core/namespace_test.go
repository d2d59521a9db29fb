package core

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/apis"
	"github.com/svcnet/svcnet/internal/registry"

	. "github.com/svcnet/svcnet/internal/registry/registrytest"
)

// memStorage is an in-memory storage.Interface with what the REST
// endpoints under test use: Get and GuaranteedUpdate.
type memStorage struct {
	storage.Interface
	objs    map[string]runtime.Object
	updates int
}

func (m *memStorage) Versioner() storage.Versioner { return storage.APIObjectVersioner{} }

func (m *memStorage) Get(_ context.Context, key string, _ storage.GetOptions, out runtime.Object) error {
	o, ok := m.objs[key]
	if !ok {
		return storage.NewKeyNotFoundError(key, 0)
	}
	reflect.ValueOf(out).Elem().Set(reflect.ValueOf(o.DeepCopyObject()).Elem())
	return nil
}

func (m *memStorage) GuaranteedUpdate(_ context.Context, key string, out runtime.Object, _ bool, _ *storage.Preconditions,
	tryUpdate storage.UpdateFunc, _ runtime.Object) error {
	o, ok := m.objs[key]
	if !ok {
		return storage.NewKeyNotFoundError(key, 0)
	}
	updated, _, err := tryUpdate(o.DeepCopyObject(), storage.ResponseMeta{})
	if err != nil {
		return err
	}
	m.updates++
	m.objs[key] = updated.DeepCopyObject()
	reflect.ValueOf(out).Elem().Set(reflect.ValueOf(updated.DeepCopyObject()).Elem())
	return nil
}

// memStore is a generic store of k over memStorage holding objs.
func memStore(k *registry.Kind, objs ...runtime.Object) (*genericregistry.Store, *memStorage) {
	ms := &memStorage{objs: map[string]runtime.Object{}}
	key := func(ctx context.Context, name string) (string, error) {
		ns, _ := genericapirequest.NamespaceFrom(ctx)
		return "/" + k.Resource.Resource + "/" + ns + "/" + name, nil
	}
	for _, o := range objs {
		m := o.(metav1.Object)
		ms.objs["/"+k.Resource.Resource+"/"+m.GetNamespace()+"/"+m.GetName()] = o
	}
	return &genericregistry.Store{
		NewFunc:                  k.New,
		NewListFunc:              k.NewList,
		DefaultQualifiedResource: k.Resource,
		KeyFunc:                  key,
		Storage: genericregistry.DryRunnableStorage{Storage: ms,
			Codec: apis.Codecs.LegacyCodec(corev1.SchemeGroupVersion)},
	}, ms
}

func namespace(mutate func(*corev1.Namespace)) *corev1.Namespace {
	return Mutated(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}, mutate)
}

func TestNamespacePrepareForCreate(t *testing.T) {
	cases := []struct {
		name       string
		mutate     func(*corev1.Namespace)
		finalizers []corev1.FinalizerName
	}{
		{"plain", nil, []corev1.FinalizerName{FinalizerKubernetes}},
		{"created terminating", func(ns *corev1.Namespace) { ns.Status.Phase = corev1.NamespaceTerminating },
			[]corev1.FinalizerName{FinalizerKubernetes}},
		{"own finalizer", func(ns *corev1.Namespace) { ns.Spec.Finalizers = []corev1.FinalizerName{"example.com/cleanup"} },
			[]corev1.FinalizerName{"example.com/cleanup", FinalizerKubernetes}},
		{"kubernetes finalizer already there", func(ns *corev1.Namespace) { ns.Spec.Finalizers = []corev1.FinalizerName{FinalizerKubernetes} },
			[]corev1.FinalizerName{FinalizerKubernetes}},
		{"wrong name label", func(ns *corev1.Namespace) {
			ns.Labels = map[string]string{corev1.LabelMetadataName: "team-b", "team": "a"}
		}, []corev1.FinalizerName{FinalizerKubernetes}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := namespace(tc.mutate)
			CheckErrors(t, ValidateCreate(Namespace, ns))
			if ns.Status.Phase != corev1.NamespaceActive {
				t.Errorf("phase %q", ns.Status.Phase)
			}
			if !slices.Equal(ns.Spec.Finalizers, tc.finalizers) {
				t.Errorf("finalizers %v, want %v", ns.Spec.Finalizers, tc.finalizers)
			}
			if ns.Labels[corev1.LabelMetadataName] != "team-a" {
				t.Errorf("labels %v", ns.Labels)
			}
		})
	}
}

func TestNamespaceValidate(t *testing.T) {
	cases := []struct {
		name string
		want []string
	}{
		{"team-a", nil},
		{"kube-system", nil},
		{"team.a", []string{Inv("metadata.name")}}, // a DNS label: no dots
		{"Team", []string{Inv("metadata.name")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			CheckErrors(t, ValidateCreate(Namespace, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tc.name}}), tc.want...)
		})
	}
}

func TestNamespaceUpdate(t *testing.T) {
	cases := []struct {
		name   string
		status bool
		mutate func(*corev1.Namespace)
		check  func(*testing.T, *corev1.Namespace)
	}{
		{"labels", false, func(ns *corev1.Namespace) { ns.Labels = map[string]string{"team": "a"} }, func(t *testing.T, ns *corev1.Namespace) {
			if ns.Labels["team"] != "a" || ns.Labels[corev1.LabelMetadataName] != "team-a" {
				t.Errorf("labels %v", ns.Labels)
			}
		}},
		{"name label changed", false, func(ns *corev1.Namespace) { ns.Labels[corev1.LabelMetadataName] = "x" }, func(t *testing.T, ns *corev1.Namespace) {
			if ns.Labels[corev1.LabelMetadataName] != "team-a" {
				t.Errorf("labels %v", ns.Labels)
			}
		}},
		{"finalizers on the main resource", false, func(ns *corev1.Namespace) { ns.Spec.Finalizers = nil }, func(t *testing.T, ns *corev1.Namespace) {
			if !slices.Equal(ns.Spec.Finalizers, []corev1.FinalizerName{FinalizerKubernetes}) {
				t.Errorf("finalizers %v", ns.Spec.Finalizers)
			}
		}},
		{"phase on the main resource", false, func(ns *corev1.Namespace) { ns.Status.Phase = corev1.NamespaceTerminating },
			func(t *testing.T, ns *corev1.Namespace) {
				if ns.Status.Phase != corev1.NamespaceActive {
					t.Errorf("phase %q", ns.Status.Phase)
				}
			}},
		{"conditions through the status subresource", true, func(ns *corev1.Namespace) {
			ns.Status.Conditions = []corev1.NamespaceCondition{{Type: corev1.NamespaceDeletionContentFailure, Status: corev1.ConditionFalse}}
			ns.Spec.Finalizers = nil
		}, func(t *testing.T, ns *corev1.Namespace) {
			if len(ns.Status.Conditions) != 1 || len(ns.Spec.Finalizers) != 1 {
				t.Errorf("status %+v, finalizers %v", ns.Status, ns.Spec.Finalizers)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := Ctx(Namespace)
			old := namespace(nil)
			Create(t, ctx, Namespace, old)
			old.ResourceVersion = "1"
			obj := old.DeepCopy()
			tc.mutate(obj)
			Update(t, ctx, Namespace, tc.status, obj, old)
			tc.check(t, obj)
		})
	}
}

func TestNamespaceTableAndFields(t *testing.T) {
	ns := namespace(func(ns *corev1.Namespace) {
		ns.Status.Phase = corev1.NamespaceTerminating
		ns.CreationTimestamp = TwoDaysAgo()
	})
	checkRow(t, Namespace, ns, []string{"Name", "Status", "Age"}, []any{"team-a", "Terminating", "2d"})
	checkFields(t, Namespace, ns, map[string]string{"metadata.name": "team-a", "status.phase": "Terminating"})
}

// stored is an active namespace as the API server stores it.
func stored() *corev1.Namespace {
	return &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: "team-a", UID: "uid-1", ResourceVersion: "5",
			Labels: map[string]string{corev1.LabelMetadataName: "team-a"}},
		Spec:   corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{FinalizerKubernetes}},
		Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive},
	}
}

func TestNamespaceDelete(t *testing.T) {
	refused := apierrors.NewForbidden(Namespace.Resource, "team-a", errors.New("protected"))
	cases := []struct {
		name     string
		target   string // the namespace deleted
		options  *metav1.DeleteOptions
		validate rest.ValidateObjectFunc
		check    func(error) bool // the error wanted; nil for none
		stored   bool             // the namespace was marked terminating
		orphan   bool             // with the orphan finalizer
	}{
		{"delete", "team-a", nil, nil, nil, true, false},
		{"orphan dependents", "team-a", &metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationOrphan)}, nil, nil, true, true},
		{"foreground", "team-a", &metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}, nil, nil, true, false},
		{"right UID", "team-a", &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr.To[types.UID]("uid-1")}}, nil, nil, true, false},
		{"wrong UID", "team-a", &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr.To[types.UID]("uid-2")}}, nil,
			apierrors.IsConflict, false, false},
		{"stale resourceVersion", "team-a", &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: ptr.To("4")}}, nil,
			apierrors.IsConflict, false, false},
		{"refused by admission", "team-a", nil, func(context.Context, runtime.Object) error { return refused }, apierrors.IsForbidden, false, false},
		{"dry run", "team-a", &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}, nil, nil, false, false},
		{"no such namespace", "team-b", nil, nil, apierrors.IsNotFound, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			store, ms := memStore(Namespace, stored())
			r := &NamespaceREST{REST: registry.NewREST(Namespace, store)}
			out, immediate, err := r.Delete(Ctx(Namespace), tc.target, tc.validate, tc.options)
			if !ExpectError(t, err, tc.check) && immediate {
				t.Fatal("deleted at once")
			}
			ns := ms.objs["/namespaces//team-a"].(*corev1.Namespace)
			marked := ns.DeletionTimestamp != nil && ns.Status.Phase == corev1.NamespaceTerminating
			if marked != tc.stored || (ms.updates > 0) != tc.stored {
				t.Errorf("stored namespace %+v, %d updates", ns, ms.updates)
			}
			if hasOrphan := slices.Contains(ns.Finalizers, metav1.FinalizerOrphanDependents); hasOrphan != tc.orphan {
				t.Errorf("finalizers %v", ns.Finalizers)
			}
			if err == nil && out.(*corev1.Namespace).Name != "team-a" {
				t.Errorf("returned %+v", out)
			}
			if tc.stored && out.(*corev1.Namespace).Status.Phase != corev1.NamespaceTerminating {
				t.Errorf("returned %+v, want the terminating namespace", out)
			}
		})
	}
}

func TestNamespaceDeleteAgain(t *testing.T) {
	ns := stored()
	when := metav1.Unix(1_800_000_000, 0)
	ns.DeletionTimestamp, ns.Status.Phase = &when, corev1.NamespaceTerminating
	store, ms := memStore(Namespace, ns)
	r := &NamespaceREST{REST: registry.NewREST(Namespace, store)}
	if _, _, err := r.Delete(Ctx(Namespace), "team-a", nil, nil); err != nil {
		t.Fatal(err)
	}
	if got := ms.objs["/namespaces//team-a"].(*corev1.Namespace).DeletionTimestamp; got == nil || !got.Equal(&when) {
		t.Errorf("deletion timestamp moved to %v", got)
	}
}

func TestNamespaceFinalize(t *testing.T) {
	finalized := func(fs ...corev1.FinalizerName) rest.UpdatedObjectInfo {
		return rest.DefaultUpdatedObjectInfo(nil, func(_ context.Context, _, old runtime.Object) (runtime.Object, error) {
			ns := old.(*corev1.Namespace).DeepCopy()
			ns.Spec.Finalizers = fs
			ns.Labels = map[string]string{"ignored": "yes"}
			return ns, nil
		})
	}
	refused := apierrors.NewForbidden(Namespace.Resource, "team-a", errors.New("protected"))
	cases := []struct {
		name     string
		req      rest.UpdatedObjectInfo
		validate rest.ValidateObjectUpdateFunc
		dryRun   bool
		check    func(error) bool
		want     []corev1.FinalizerName // stored afterwards
	}{
		{"finalizers cleared", finalized(), nil, false, nil, nil},
		{"finalizer added", finalized(FinalizerKubernetes, "example.com/cleanup"), nil, false, nil,
			[]corev1.FinalizerName{FinalizerKubernetes, "example.com/cleanup"}},
		{"empty finalizer", finalized(""), nil, false, apierrors.IsInvalid, []corev1.FinalizerName{FinalizerKubernetes}},
		{"stale", rest.DefaultUpdatedObjectInfo(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", ResourceVersion: "4"}}),
			nil, false, apierrors.IsConflict, []corev1.FinalizerName{FinalizerKubernetes}},
		{"refused by admission", finalized(), func(context.Context, runtime.Object, runtime.Object) error { return refused }, false,
			apierrors.IsForbidden, []corev1.FinalizerName{FinalizerKubernetes}},
		{"dry run", finalized(), nil, true, nil, []corev1.FinalizerName{FinalizerKubernetes}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			store, ms := memStore(Namespace, stored())
			opts := &metav1.UpdateOptions{}
			if tc.dryRun {
				opts.DryRun = []string{metav1.DryRunAll}
			}
			out, created, err := (&FinalizeREST{Store: store}).Update(Ctx(Namespace), "team-a", tc.req, nil, tc.validate, false, opts)
			if !ExpectError(t, err, tc.check) && created {
				t.Fatal("finalize created the namespace")
			}
			ns := ms.objs["/namespaces//team-a"].(*corev1.Namespace)
			if !slices.Equal(ns.Spec.Finalizers, tc.want) {
				t.Errorf("stored finalizers %v, want %v", ns.Spec.Finalizers, tc.want)
			}
			if len(ns.Labels) != 1 {
				t.Errorf("labels changed through finalize: %v", ns.Labels)
			}
			if err == nil && (out.(*corev1.Namespace).Labels["ignored"] != "" || len(out.(*corev1.Namespace).Spec.Finalizers) != len(finalizersOf(tc.req))) {
				t.Errorf("returned %+v", out)
			}
		})
	}
}

// finalizersOf is what req sets spec.finalizers to.
func finalizersOf(req rest.UpdatedObjectInfo) []corev1.FinalizerName {
	obj, err := req.UpdatedObject(context.Background(), stored())
	if err != nil {
		return nil
	}
	return obj.(*corev1.Namespace).Spec.Finalizers
}
