// Package registry turns a Kind description into the REST storage that the
// generic API server serves: strategies, status subresources, field labels
// and table output. Folders below it describe one kind each.
package registry

import (
	"context"
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"
)

// Kind describes one served resource. Only the first block is required.
type Kind struct {
	Resource   schema.GroupResource // e.g. {Group: "apps", Resource: "deployments"}
	Singular   string               // e.g. "deployment"
	Version    string               // served version, e.g. "v1"
	Namespaced bool
	New        func() runtime.Object
	NewList    func() runtime.Object

	ShortNames []string
	Categories []string

	// Status: the kind has a status subresource; the main resource ignores
	// status changes and the status subresource ignores everything else.
	Status bool
	// KeepStatusOnCreate: a create may set status (nodes); otherwise it is
	// cleared and left to PrepareForCreate and the status subresource.
	KeepStatusOnCreate bool
	// Generation: metadata.generation counts changes of spec.
	Generation bool

	// PrepareForCreate and PrepareForUpdate clear or derive fields before
	// validation (after the generic status/spec handling).
	PrepareForCreate func(ctx context.Context, obj runtime.Object)
	PrepareForUpdate func(ctx context.Context, obj, old runtime.Object)
	// Validate and ValidateUpdate check a kind's own rules; object metadata
	// is checked by the generic server.
	Validate       func(ctx context.Context, obj runtime.Object) field.ErrorList
	ValidateUpdate func(ctx context.Context, obj, old runtime.Object) field.ErrorList
	// ValidateStatusUpdate checks an update through the status subresource.
	ValidateStatusUpdate func(ctx context.Context, obj, old runtime.Object) field.ErrorList

	// Fields returns the selectable fields beyond metadata.name/namespace.
	Fields func(obj runtime.Object) fields.Set
	// Table prints the kind for `kubectl get`.
	Table *Table
	// TTLSeconds, when set, expires stored objects (events).
	TTLSeconds uint64
	// GracefulDelete decides the grace period of a delete (pods). It
	// returns true when the delete is graceful.
	GracefulDelete func(ctx context.Context, obj runtime.Object, options *metav1.DeleteOptions) bool
}

// GroupVersion is the served group version of the kind.
func (k *Kind) GroupVersion() schema.GroupVersion {
	return schema.GroupVersion{Group: k.Resource.Group, Version: k.Version}
}

// AttrFunc returns labels and selectable fields of an object.
func (k *Kind) AttrFunc(obj runtime.Object) (labels.Set, fields.Set, error) {
	m, err := metaAccessor(obj)
	if err != nil {
		return nil, nil, err
	}
	fs := fields.Set{"metadata.name": m.GetName()}
	if k.Namespaced {
		fs["metadata.namespace"] = m.GetNamespace()
	}
	if k.Fields != nil {
		for f, v := range k.Fields(obj) {
			fs[f] = v
		}
	}
	return labels.Set(m.GetLabels()), fs, nil
}

// Predicate matches objects against label and field selectors.
func (k *Kind) Predicate(label labels.Selector, field fields.Selector) storage.SelectionPredicate {
	return storage.SelectionPredicate{Label: label, Field: field, GetAttrs: k.AttrFunc}
}

// StoreOptions are the generic store options of the kind.
func (k *Kind) StoreOptions(optsGetter generic.RESTOptionsGetter) *generic.StoreOptions {
	return &generic.StoreOptions{RESTOptions: optsGetter, AttrFunc: k.AttrFunc}
}

// copyField copies the named top-level struct field (Spec, Status) from
// src to dst, two objects of the same kind.
func copyField(dst, src runtime.Object, name string) {
	d := reflect.ValueOf(dst).Elem().FieldByName(name)
	s := reflect.ValueOf(src).Elem().FieldByName(name)
	if d.IsValid() && s.IsValid() && d.CanSet() {
		d.Set(s)
	}
}

// fieldValue returns the named top-level struct field of obj.
func fieldValue(obj runtime.Object, name string) any {
	v := reflect.ValueOf(obj).Elem().FieldByName(name)
	if !v.IsValid() {
		return nil
	}
	return v.Interface()
}

// zeroField resets the named top-level struct field of obj.
func zeroField(obj runtime.Object, name string) {
	v := reflect.ValueOf(obj).Elem().FieldByName(name)
	if v.IsValid() && v.CanSet() {
		v.Set(reflect.Zero(v.Type()))
	}
}

var _ rest.TableConvertor = (*Table)(nil)
