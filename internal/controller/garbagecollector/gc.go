// Package garbagecollector deletes objects whose owners are gone, like
// kube-controller-manager's garbage collector: background cascading
// deletion, foreground deletion (the foregroundDeletion finalizer) and
// orphaning (the orphan finalizer), driven by ownerReferences.
package garbagecollector

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"

	"github.com/svcnet/svcnet/internal/controller"
)

// node is what the collector knows of one object.
type node struct {
	gvr        schema.GroupVersionResource
	namespace  string
	name       string
	uid        types.UID
	owners     []metav1.OwnerReference
	finalizers []string
	deleting   bool
}

// Collector is the garbage collector.
type Collector struct {
	metadata  metadata.Interface
	discovery discovery.DiscoveryInterface
	mapper    *restmapper.DeferredDiscoveryRESTMapper
	factory   metadatainformer.SharedInformerFactory
	queue     *controller.Queue

	mu         sync.Mutex
	nodes      map[types.UID]*node
	dependents map[types.UID]map[types.UID]bool
	synced     []cache.InformerSynced
}

// New returns a collector over every resource the server can list, watch,
// patch and delete.
func New(meta metadata.Interface, disc discovery.DiscoveryInterface) (*Collector, error) {
	c := &Collector{
		metadata:   meta,
		discovery:  disc,
		mapper:     restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc)),
		factory:    metadatainformer.NewSharedInformerFactory(meta, 0),
		nodes:      map[types.UID]*node{},
		dependents: map[types.UID]map[types.UID]bool{},
	}
	c.queue = controller.NewQueue("garbagecollector", c.sync)
	lists, err := disc.ServerPreferredResources()
	if err != nil && len(lists) == 0 {
		return nil, fmt.Errorf("discover resources: %w", err)
	}
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range list.APIResources {
			if !hasVerbs(r.Verbs, "list", "watch", "patch", "delete") {
				continue
			}
			gvr := gv.WithResource(r.Name)
			inf := c.factory.ForResource(gvr).Informer()
			_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
				AddFunc:    func(obj any) { c.observe(gvr, obj) },
				UpdateFunc: func(_, obj any) { c.observe(gvr, obj) },
				DeleteFunc: func(obj any) { c.forget(obj) },
			})
			c.synced = append(c.synced, inf.HasSynced)
		}
	}
	return c, nil
}

func hasVerbs(have []string, want ...string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

// Run collects garbage until ctx ends.
func (c *Collector) Run(ctx context.Context) {
	c.factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return
	}
	c.queue.Run(ctx, 4)
}

func (c *Collector) observe(gvr schema.GroupVersionResource, obj any) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	n := &node{gvr: gvr, namespace: m.GetNamespace(), name: m.GetName(), uid: m.GetUID(),
		owners: m.GetOwnerReferences(), finalizers: m.GetFinalizers(), deleting: m.GetDeletionTimestamp() != nil}
	c.mu.Lock()
	if old := c.nodes[n.uid]; old != nil {
		c.unlinkLocked(old)
	}
	c.nodes[n.uid] = n
	enqueue := n.deleting && (slices.Contains(n.finalizers, metav1.FinalizerOrphanDependents) ||
		slices.Contains(n.finalizers, metav1.FinalizerDeleteDependents))
	for _, o := range n.owners {
		if c.dependents[o.UID] == nil {
			c.dependents[o.UID] = map[types.UID]bool{}
		}
		c.dependents[o.UID][n.uid] = true
		if owner := c.nodes[o.UID]; owner == nil || owner.deleting {
			enqueue = true
		}
	}
	c.mu.Unlock()
	if enqueue {
		c.queue.Add(string(n.uid))
	}
}

func (c *Collector) forget(obj any) {
	m, ok := controller.As[metav1.Object](obj)
	if !ok {
		return
	}
	uid := m.GetUID()
	c.mu.Lock()
	n := c.nodes[uid]
	var wake []types.UID
	if n != nil {
		c.unlinkLocked(n)
		delete(c.nodes, uid)
		// Owners waiting in foreground deletion may now be done.
		for _, o := range n.owners {
			if owner := c.nodes[o.UID]; owner != nil && owner.deleting {
				wake = append(wake, o.UID)
			}
		}
	}
	for dep := range c.dependents[uid] {
		wake = append(wake, dep)
	}
	c.mu.Unlock()
	for _, u := range wake {
		c.queue.Add(string(u))
	}
}

func (c *Collector) unlinkLocked(n *node) {
	for _, o := range n.owners {
		if deps := c.dependents[o.UID]; deps != nil {
			delete(deps, n.uid)
			if len(deps) == 0 {
				delete(c.dependents, o.UID)
			}
		}
	}
}

// snapshot returns a copy of the node and of its dependents.
func (c *Collector) snapshot(uid types.UID) (*node, []*node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.nodes[uid]
	if n == nil {
		return nil, nil
	}
	cp := *n
	var deps []*node
	for d := range c.dependents[uid] {
		if dn := c.nodes[d]; dn != nil {
			dc := *dn
			deps = append(deps, &dc)
		}
	}
	return &cp, deps
}

func (c *Collector) sync(ctx context.Context, key string) (time.Duration, error) {
	n, deps := c.snapshot(types.UID(key))
	if n == nil {
		return 0, nil
	}
	if n.deleting && slices.Contains(n.finalizers, metav1.FinalizerOrphanDependents) {
		return 0, c.orphan(ctx, n, deps)
	}
	if n.deleting && slices.Contains(n.finalizers, metav1.FinalizerDeleteDependents) {
		return c.foreground(ctx, n, deps)
	}
	return 0, c.collectIfOrphaned(ctx, n)
}

// orphan removes n from its dependents' owners, then lets n go.
func (c *Collector) orphan(ctx context.Context, n *node, deps []*node) error {
	for _, d := range deps {
		if err := c.removeOwner(ctx, d, n.uid); err != nil {
			return err
		}
	}
	return c.removeFinalizer(ctx, n, metav1.FinalizerOrphanDependents)
}

// foreground deletes n's dependents and lets n go once none that block
// it is left.
func (c *Collector) foreground(ctx context.Context, n *node, deps []*node) (time.Duration, error) {
	foreground := metav1.DeletePropagationForeground
	blocking := 0
	for _, d := range deps {
		for _, o := range d.owners {
			if o.UID == n.uid && o.BlockOwnerDeletion != nil && *o.BlockOwnerDeletion {
				blocking++
			}
		}
		if !d.deleting {
			if err := c.delete(ctx, d, foreground); err != nil {
				return 0, err
			}
		}
	}
	if blocking > 0 {
		// The dependents' deletion events bring n back; this is a fallback.
		return 5 * time.Second, nil
	}
	return 0, c.removeFinalizer(ctx, n, metav1.FinalizerDeleteDependents)
}

// collectIfOrphaned deletes n when none of its owners exists any more, or
// drops the owner references that point at nothing.
func (c *Collector) collectIfOrphaned(ctx context.Context, n *node) error {
	if len(n.owners) == 0 {
		return nil
	}
	var absent []metav1.OwnerReference
	for _, o := range n.owners {
		exists, waitingForeground, err := c.ownerState(ctx, n, o)
		if err != nil {
			return err
		}
		if waitingForeground && !n.deleting {
			// The owner is being deleted in the foreground: go first.
			return c.delete(ctx, n, metav1.DeletePropagationForeground)
		}
		if !exists {
			absent = append(absent, o)
		}
	}
	switch {
	case len(absent) == 0:
		return nil
	case len(absent) == len(n.owners):
		if n.deleting {
			return nil
		}
		slog.Debug("collecting object whose owners are gone", "resource", n.gvr.Resource, "namespace", n.namespace, "name", n.name)
		return c.delete(ctx, n, metav1.DeletePropagationBackground)
	}
	for _, o := range absent {
		if err := c.removeOwner(ctx, n, o.UID); err != nil {
			return err
		}
	}
	return nil
}

// ownerState looks the owner up in the cache, and in the API when the
// cache has not seen it (it may be newer than the cache).
func (c *Collector) ownerState(ctx context.Context, n *node, o metav1.OwnerReference) (exists, foreground bool, err error) {
	c.mu.Lock()
	owner := c.nodes[o.UID]
	c.mu.Unlock()
	if owner != nil {
		return true, owner.deleting && slices.Contains(owner.finalizers, metav1.FinalizerDeleteDependents), nil
	}
	gv, err := schema.ParseGroupVersion(o.APIVersion)
	if err != nil {
		return false, false, nil // an owner that cannot exist
	}
	mapping, err := c.mapper.RESTMapping(gv.WithKind(o.Kind).GroupKind(), gv.Version)
	if err != nil {
		c.mapper.Reset()
		if meta.IsNoMatchError(err) {
			return false, false, nil
		}
		return false, false, err
	}
	ri := c.metadata.Resource(mapping.Resource)
	var live *metav1.PartialObjectMetadata
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		live, err = ri.Namespace(n.namespace).Get(ctx, o.Name, metav1.GetOptions{})
	} else {
		live, err = ri.Get(ctx, o.Name, metav1.GetOptions{})
	}
	switch {
	case apierrors.IsNotFound(err):
		return false, false, nil
	case err != nil:
		return false, false, err
	}
	return live.UID == o.UID, false, nil
}

func (c *Collector) client(n *node) metadata.ResourceInterface {
	if n.namespace == "" {
		return c.metadata.Resource(n.gvr)
	}
	return c.metadata.Resource(n.gvr).Namespace(n.namespace)
}

func (c *Collector) delete(ctx context.Context, n *node, policy metav1.DeletionPropagation) error {
	uid := n.uid
	err := c.client(n).Delete(ctx, n.name, metav1.DeleteOptions{PropagationPolicy: &policy,
		Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone, or replaced by a new object of the same name
	}
	return err
}

func (c *Collector) removeOwner(ctx context.Context, n *node, owner types.UID) error {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":             n.uid,
		"ownerReferences": []map[string]any{{"$patch": "delete", "uid": owner}},
	}})
	_, err := c.client(n).Patch(ctx, n.name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func (c *Collector) removeFinalizer(ctx context.Context, n *node, finalizer string) error {
	live, err := c.client(n).Get(ctx, n.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if live.UID != n.uid || !slices.Contains(live.Finalizers, finalizer) {
		return nil
	}
	rest := slices.DeleteFunc(slices.Clone(live.Finalizers), func(f string) bool { return f == finalizer })
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"finalizers":      rest,
		"resourceVersion": live.ResourceVersion, // conflict instead of lost update
	}})
	_, err = c.client(n).Patch(ctx, n.name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
