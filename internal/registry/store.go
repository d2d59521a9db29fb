package registry

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// NewStore builds the generic etcd-backed store of k. Callers may set the
// store's hooks (BeginCreate, AfterDelete …) before serving it.
func NewStore(k *Kind, optsGetter generic.RESTOptionsGetter) (*genericregistry.Store, error) {
	strategy := NewStrategy(k)
	store := &genericregistry.Store{
		NewFunc:                  k.New,
		NewListFunc:              k.NewList,
		DefaultQualifiedResource: k.Resource,
		PredicateFunc:            k.Predicate,
		CreateStrategy:           strategy,
		UpdateStrategy:           strategy,
		DeleteStrategy:           strategy,
		ResetFieldsStrategy:      strategy,
		EnableGarbageCollection:  true,
		DeleteCollectionWorkers:  4,
	}
	store.SingularQualifiedResource = k.Resource
	store.SingularQualifiedResource.Resource = k.Singular
	store.TableConvertor = rest.NewDefaultTableConvertor(k.Resource)
	if k.Table != nil {
		store.TableConvertor = k.Table
	}
	if k.TTLSeconds > 0 {
		ttl := k.TTLSeconds
		store.TTLFunc = func(runtime.Object, uint64, bool) (uint64, error) { return ttl, nil }
	}
	if err := store.CompleteWithOptions(k.StoreOptions(optsGetter)); err != nil {
		return nil, fmt.Errorf("store for %s: %w", k.Resource, err)
	}
	return store, nil
}

// NewStatusREST serves the status subresource of the kind behind store.
func NewStatusREST(k *Kind, store *genericregistry.Store) *StatusREST {
	status := *store
	strategy := &StatusStrategy{Strategy: NewStrategy(k)}
	status.UpdateStrategy = strategy
	status.ResetFieldsStrategy = strategy
	status.CreateStrategy = nil
	status.DeleteStrategy = nil
	return &StatusREST{store: &status}
}

// StatusREST is the REST endpoint of a status subresource.
type StatusREST struct {
	store *genericregistry.Store
}

func (r *StatusREST) New() runtime.Object { return r.store.New() }
func (r *StatusREST) Destroy()            {}

func (r *StatusREST) Get(ctx context.Context, name string, options *metav1.GetOptions) (runtime.Object, error) {
	return r.store.Get(ctx, name, options)
}

func (r *StatusREST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo,
	createValidation rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc,
	forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	// Status updates never create the object.
	return r.store.Update(ctx, name, objInfo, createValidation, updateValidation, false, options)
}

func (r *StatusREST) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return r.store.GetResetFields()
}

func (r *StatusREST) ConvertToTable(ctx context.Context, obj runtime.Object, opts runtime.Object) (*metav1.Table, error) {
	return r.store.ConvertToTable(ctx, obj, opts)
}

var (
	_ rest.Patcher = (*StatusREST)(nil)
)

// REST is a kind's main endpoint: its store plus the names kubectl knows
// it by.
type REST struct {
	*genericregistry.Store
	Kind *Kind
}

// NewREST wraps store as the main endpoint of k.
func NewREST(k *Kind, store *genericregistry.Store) *REST { return &REST{Store: store, Kind: k} }

func (r *REST) ShortNames() []string { return r.Kind.ShortNames }
func (r *REST) Categories() []string { return r.Kind.Categories }

var (
	_ rest.ShortNamesProvider   = (*REST)(nil)
	_ rest.CategoriesProvider   = (*REST)(nil)
	_ rest.StandardStorage      = (*REST)(nil)
	_ rest.SingularNameProvider = (*REST)(nil)
)
