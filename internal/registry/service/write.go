package service

import (
	"context"
	"errors"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	"k8s.io/client-go/tools/cache"

	"github.com/svcnet/svcnet/internal/registry"
)

// REST is the Services endpoint: the store, with each request's
// allocations ending as its etcd write does. What a write gives up is
// freed only once it has committed, and what it took is given back only
// when it surely did not: freed early, a value that the stored Service
// still holds could go to another; given back after a failure that may
// have come once etcd had applied the write (a timeout), a value the
// stored Service may hold could. What is neither freed nor given back
// is a leak, which the repair frees (RunRepair). kube-apiserver's
// Service storage frees the values an update gives up before its etcd
// write.
type REST struct {
	*registry.REST
}

var (
	_ rest.StandardStorage      = (*REST)(nil)
	_ rest.ShortNamesProvider   = (*REST)(nil)
	_ rest.CategoriesProvider   = (*REST)(nil)
	_ rest.SingularNameProvider = (*REST)(nil)
)

func (r *REST) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc,
	options *metav1.CreateOptions) (runtime.Object, error) {
	w := &write{finishAfterWrite: true}
	out, err := r.REST.Create(context.WithValue(ctx, writeKey{}, w), obj, createValidation, options)
	w.end(err)
	return out, err
}

func (r *REST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc,
	updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	w := &write{}
	out, created, err := r.REST.Update(context.WithValue(ctx, writeKey{}, w), name, objInfo, createValidation, updateValidation, forceAllowCreate, options)
	w.end(err)
	return out, created, err
}

// write follows one create or update through the store, whose
// allocation hooks hand it what they leave pending until the outcome
// of the etcd write is known. The store calls the hooks' finish
// functions after the write on a create, and before it on an update
// (and on a create through an update, as server-side apply makes).
type write struct {
	finishAfterWrite bool
	// t is what the pending attempt allocated; release frees what it
	// gave up.
	t       *txn
	release func()
}

type writeKey struct{}

// writeOf returns the write of ctx's request: nil for a call that did
// not come through REST (nothing serves the store otherwise).
func writeOf(ctx context.Context) *write {
	w, _ := ctx.Value(writeKey{}).(*write)
	return w
}

// begin starts an attempt. The store tries an update again only when
// the last attempt's write did not happen (another writer came first),
// so what that attempt allocated goes back.
func (w *write) begin() {
	if w != nil && w.t != nil {
		w.t.rollback()
		w.t, w.release = nil, nil
	}
}

// finish ends an attempt that allocated t and gives up what release
// frees (nil: nothing), as the store reports it.
func (w *write) finish(t *txn, success, dryRun bool, release func()) {
	switch {
	case dryRun:
		t.rollback() // nothing was recorded; the server's view is put back
	case w == nil:
		// The outcome of the write is unknown here: the values given
		// up are left to the repair.
		if !success {
			t.rollback()
		}
	case w.finishAfterWrite && success:
	case w.finishAfterWrite:
		w.t = t // failed before or in the write: end knows which
	case success:
		w.t, w.release = t, release // the write comes next
	default:
		t.rollback() // the update failed before its write
	}
}

// end settles the pending attempt once the request returned err.
func (w *write) end(err error) {
	t, release := w.t, w.release
	w.t, w.release = nil, nil
	switch {
	case err == nil:
		if release != nil {
			release()
		}
	case t == nil:
	case notWritten(err):
		t.rollback()
	default:
		slog.Warn("a Service write failed and may have been applied: its allocations are kept, and the repair frees what no Service holds",
			"service", t.owner.Namespace+"/"+t.owner.Name, "err", err)
	}
}

// notWritten reports whether err proves that the etcd write did not
// happen: an API error of a request refused before its write, or of a
// write etcd refused (conflict, already exists, not found, invalid …).
// Timeouts, and errors of etcd's client, may come after etcd applied
// it.
func notWritten(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	switch apierrors.ReasonForError(err) {
	case metav1.StatusReasonTimeout, metav1.StatusReasonServerTimeout:
		return false
	}
	return true
}

// releaseOnDelete frees a Service's allocations once its deletion has
// committed, with the Service as etcd deleted it. Only the request whose
// delete succeeded frees them: a delete that finds the Service gone
// (another request deleted it first, and freed them) frees nothing,
// since its values may since have gone to another Service.
type releaseOnDelete struct {
	storage.Interface
	alloc *Allocators
}

func (s *releaseOnDelete) Delete(ctx context.Context, key string, out runtime.Object, preconditions *storage.Preconditions,
	validateDeletion storage.ValidateObjectFunc, cachedExistingObject runtime.Object, opts storage.DeleteOptions) error {
	if err := s.Interface.Delete(ctx, key, out, preconditions, validateDeletion, cachedExistingObject, opts); err != nil {
		return err
	}
	if svc, ok := out.(*corev1.Service); ok {
		s.alloc.Release(ctx, svc)
	}
	return nil
}

// releasing is optsGetter with its storage wrapped in releaseOnDelete.
func releasing(optsGetter generic.RESTOptionsGetter, alloc *Allocators) generic.RESTOptionsGetter {
	return wrapStorage{optsGetter, func(s storage.Interface) storage.Interface {
		return &releaseOnDelete{Interface: s, alloc: alloc}
	}}
}

// wrapStorage is a RESTOptionsGetter whose storage is wrapped by wrap.
type wrapStorage struct {
	generic.RESTOptionsGetter
	wrap func(storage.Interface) storage.Interface
}

func (w wrapStorage) GetRESTOptions(resource schema.GroupResource, example runtime.Object) (generic.RESTOptions, error) {
	o, err := w.RESTOptionsGetter.GetRESTOptions(resource, example)
	if err != nil {
		return o, err
	}
	decorate := o.Decorator
	o.Decorator = func(config *storagebackend.ConfigForResource, prefix string, keyFunc func(runtime.Object) (string, error),
		newFunc, newListFunc func() runtime.Object, attrs storage.AttrFunc, trigger storage.IndexerFuncs,
		indexers *cache.Indexers) (storage.Interface, factory.DestroyFunc, error) {
		s, destroy, err := decorate(config, prefix, keyFunc, newFunc, newListFunc, attrs, trigger, indexers)
		if err != nil {
			return s, destroy, err
		}
		return w.wrap(s), destroy, nil
	}
	return o, nil
}
