package registry

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage/names"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/svcnet/svcnet/internal/apis"
)

// Strategy implements the create, update and delete strategies of a Kind
// on its main resource.
type Strategy struct {
	runtime.ObjectTyper
	names.NameGenerator
	kind *Kind
}

// NewStrategy returns the main-resource strategy of k.
func NewStrategy(k *Kind) *Strategy {
	return &Strategy{ObjectTyper: apis.Scheme, NameGenerator: names.SimpleNameGenerator, kind: k}
}

func (s *Strategy) NamespaceScoped() bool { return s.kind.Namespaced }

func (s *Strategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	if s.kind.Status && !s.kind.KeepStatusOnCreate {
		zeroField(obj, "Status")
	}
	if s.kind.Generation {
		if m, err := meta.Accessor(obj); err == nil {
			m.SetGeneration(1)
		}
	}
	if s.kind.PrepareForCreate != nil {
		s.kind.PrepareForCreate(ctx, obj)
	}
}

func (s *Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	if s.kind.Validate == nil {
		return nil
	}
	return s.kind.Validate(ctx, obj)
}

func (s *Strategy) WarningsOnCreate(context.Context, runtime.Object) []string { return nil }
func (s *Strategy) Canonicalize(runtime.Object)                               {}
func (s *Strategy) AllowCreateOnUpdate(context.Context) bool                  { return false }
func (s *Strategy) AllowUnconditionalUpdate(context.Context) bool             { return true }

func (s *Strategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	if s.kind.Status {
		copyField(obj, old, "Status")
	}
	if s.kind.Generation && !equality.Semantic.DeepEqual(fieldValue(obj, "Spec"), fieldValue(old, "Spec")) {
		if m, err := meta.Accessor(obj); err == nil {
			m.SetGeneration(m.GetGeneration() + 1)
		}
	}
	if s.kind.PrepareForUpdate != nil {
		s.kind.PrepareForUpdate(ctx, obj, old)
	}
}

func (s *Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	var errs field.ErrorList
	if s.kind.Validate != nil {
		errs = append(errs, s.kind.Validate(ctx, obj)...)
	}
	if s.kind.ValidateUpdate != nil {
		errs = append(errs, s.kind.ValidateUpdate(ctx, obj, old)...)
	}
	return errs
}

func (s *Strategy) WarningsOnUpdate(context.Context, runtime.Object, runtime.Object) []string {
	return nil
}

// CheckGracefulDelete makes pod-like kinds delete gracefully.
func (s *Strategy) CheckGracefulDelete(ctx context.Context, obj runtime.Object, options *metav1.DeleteOptions) bool {
	if s.kind.GracefulDelete == nil {
		return false
	}
	return s.kind.GracefulDelete(ctx, obj, options)
}

// GetResetFields tells server-side apply which fields this endpoint owns
// nothing of.
func (s *Strategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	if !s.kind.Status {
		return nil
	}
	return map[fieldpath.APIVersion]*fieldpath.Set{
		fieldpath.APIVersion(s.kind.GroupVersion().String()): fieldpath.NewSet(fieldpath.MakePathOrDie("status")),
	}
}

// StatusStrategy is the update strategy of a kind's status subresource.
type StatusStrategy struct {
	*Strategy
}

func (s *StatusStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	copyField(obj, old, "Spec")
	// Status writers may not change what the main resource owns.
	newMeta, err1 := meta.Accessor(obj)
	oldMeta, err2 := meta.Accessor(old)
	if err1 == nil && err2 == nil {
		newMeta.SetOwnerReferences(oldMeta.GetOwnerReferences())
		newMeta.SetFinalizers(oldMeta.GetFinalizers())
	}
}

func (s *StatusStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	if s.kind.ValidateStatusUpdate == nil {
		return nil
	}
	return s.kind.ValidateStatusUpdate(ctx, obj, old)
}

func (s *StatusStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return map[fieldpath.APIVersion]*fieldpath.Set{
		fieldpath.APIVersion(s.kind.GroupVersion().String()): fieldpath.NewSet(
			fieldpath.MakePathOrDie("spec"),
			fieldpath.MakePathOrDie("metadata", "ownerReferences"),
			fieldpath.MakePathOrDie("metadata", "finalizers"),
		),
	}
}

var (
	_ rest.RESTCreateStrategy         = (*Strategy)(nil)
	_ rest.RESTUpdateStrategy         = (*Strategy)(nil)
	_ rest.RESTDeleteStrategy         = (*Strategy)(nil)
	_ rest.RESTGracefulDeleteStrategy = (*Strategy)(nil)
	_ rest.ResetFieldsStrategy        = (*Strategy)(nil)
	_ rest.RESTUpdateStrategy         = (*StatusStrategy)(nil)
)

func metaAccessor(obj runtime.Object) (metav1.Object, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, fmt.Errorf("object %T has no metadata: %w", obj, err)
	}
	return m, nil
}
