package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"

	"github.com/svcnet/svcnet/internal/registry/service"
	"github.com/svcnet/svcnet/internal/registry/service/allocator"
)

// The labels kube-apiserver's allocator puts on its IPAddresses.
const (
	ipFamilyLabel  = "ipaddress.kubernetes.io/ip-family"
	managedByLabel = "ipaddress.kubernetes.io/managed-by"
	ipAllocator    = "ipallocator.k8s.io"
	// nodePortsKey is where kube-apiserver keeps the node-port bitmap
	// (under the etcd prefix).
	nodePortsKey = "/ranges/servicenodeports"
	// suspectsAnnotation keeps service.NodePorts.Suspects on the
	// node-port RangeAllocation: a JSON object of port numbers to tokens.
	suspectsAnnotation = "svcnet.dev/suspected-node-port-leaks"
)

// allocRecord records the Services' allocations in etcd, as
// kube-apiserver does: an IPAddress object per cluster IP, and the
// node ports as a RangeAllocation written with compare-and-swap.
type allocRecord struct {
	ips       *genericregistry.Store
	ports     storage.Interface
	portRange string
	destroy   func()
}

var _ service.Record = (*allocRecord)(nil)

func newAllocRecord(optsGetter generic.RESTOptionsGetter, ips *genericregistry.Store, portRange string) (*allocRecord, error) {
	st, destroy, err := rawStorage(optsGetter, "rangeallocations", "/ranges",
		func() runtime.Object { return &corev1.RangeAllocation{} },
		func() runtime.Object { return &metav1.List{} })
	if err != nil {
		return nil, fmt.Errorf("storage of the node-port range: %w", err)
	}
	return &allocRecord{ips: ips, ports: st, portRange: portRange, destroy: destroy}, nil
}

func parent(owner service.Owner) *networkingv1.ParentReference {
	return &networkingv1.ParentReference{Group: "", Resource: "services", Namespace: owner.Namespace, Name: owner.Name}
}

// ownerOf is the Service an IPAddress records; Foreign for anything
// else (another allocator's, or a user's).
func ownerOf(ip *networkingv1.IPAddress) service.Owner {
	ref := ip.Spec.ParentRef
	if ref == nil || ref.Group != "" || ref.Resource != "services" || ip.Labels[managedByLabel] != ipAllocator {
		return service.Owner{Foreign: true}
	}
	return service.Owner{Namespace: ref.Namespace, Name: ref.Name}
}

func clusterScoped(ctx context.Context) context.Context {
	return request.WithNamespace(ctx, metav1.NamespaceNone)
}

func (r *allocRecord) ClaimIP(ctx context.Context, ip netip.Addr, owner service.Owner) error {
	ctx = clusterScoped(ctx)
	family := "IPv4"
	if ip.Is6() {
		family = "IPv6"
	}
	obj := &networkingv1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{Name: ip.String(), Labels: map[string]string{ipFamilyLabel: family, managedByLabel: ipAllocator}},
		Spec:       networkingv1.IPAddressSpec{ParentRef: parent(owner)},
	}
	_, err := r.ips.Create(ctx, obj, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// Whoever holds it, even a Service of the same name (a retried
		// or concurrent create): only the request that created the
		// record may undo it.
		return allocator.ErrAllocated
	}
	return err
}

func (r *allocRecord) FreeIP(ctx context.Context, ip netip.Addr, rec service.IPRecord) error {
	ctx = clusterScoped(ctx)
	obj, err := r.ips.Get(ctx, ip.String(), &metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	addr := obj.(*networkingv1.IPAddress)
	if ownerOf(addr) != rec.Owner || (rec.ID != "" && string(addr.UID) != rec.ID) {
		return nil // since given to another Service, or recorded again
	}
	uid, rv := addr.UID, addr.ResourceVersion
	_, _, err = r.ips.Delete(ctx, ip.String(), rest.ValidateAllObjectFunc,
		&metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone, or taken again meanwhile
	}
	return err
}

func (r *allocRecord) ListIPs(ctx context.Context) (map[netip.Addr]service.IPRecord, error) {
	obj, err := r.ips.List(clusterScoped(ctx), &metainternalversion.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[netip.Addr]service.IPRecord{}
	for i := range obj.(*networkingv1.IPAddressList).Items {
		addr := &obj.(*networkingv1.IPAddressList).Items[i]
		ip, err := netip.ParseAddr(addr.Name)
		if err != nil {
			continue
		}
		out[ip] = service.IPRecord{Owner: ownerOf(addr), ID: string(addr.UID)}
	}
	return out, nil
}

func (r *allocRecord) UpdatePorts(ctx context.Context, fn func(*service.NodePorts) error) error {
	out := &corev1.RangeAllocation{}
	return r.ports.GuaranteedUpdate(ctx, nodePortsKey, out, true, nil,
		func(in runtime.Object, _ storage.ResponseMeta) (runtime.Object, *uint64, error) {
			cur := in.(*corev1.RangeAllocation)
			np := &service.NodePorts{Used: cur.Data, Suspects: suspects(cur)}
			if cur.Range != "" && cur.Range != r.portRange {
				// --service-node-port-range changed: carry the ports
				// over by number; those outside the new range are gone.
				var err error
				if np.Used, err = rebase(cur.Range, r.portRange, cur.Data); err != nil {
					return nil, nil, err
				}
			}
			if err := fn(np); err != nil {
				return nil, nil, err
			}
			next := cur.DeepCopy()
			next.Name, next.Range, next.Data = "servicenodeports", r.portRange, np.Used
			setSuspects(next, np.Suspects)
			return next, nil, nil
		}, nil)
}

// suspects reads the repair's tokens from the node-port record. An
// annotation that does not parse counts as none: tokens only hold back
// the freeing of leaks, and the next repair makes new ones.
func suspects(ra *corev1.RangeAllocation) map[int]string {
	out := map[int]string{}
	if v, ok := ra.Annotations[suspectsAnnotation]; ok && json.Unmarshal([]byte(v), &out) != nil {
		out = map[int]string{}
	}
	return out
}

func setSuspects(ra *corev1.RangeAllocation, tokens map[int]string) {
	if len(tokens) == 0 {
		delete(ra.Annotations, suspectsAnnotation)
		return
	}
	data, _ := json.Marshal(tokens) // a map of ints to strings always encodes
	if ra.Annotations == nil {
		ra.Annotations = map[string]string{}
	}
	ra.Annotations[suspectsAnnotation] = string(data)
}

// rebase re-encodes a node-port bitmap of range from for range to.
func rebase(from, to string, data []byte) ([]byte, error) {
	old, err := allocator.NewPortRange(from)
	if err != nil {
		return nil, fmt.Errorf("recorded node-port range: %w", err)
	}
	next, err := allocator.NewPortRange(to)
	if err != nil {
		return nil, err
	}
	old.Restore(data)
	for p := old.Base(); old.Contains(p); p++ {
		if old.HasPort(p) && next.Contains(p) {
			_ = next.AllocatePort(p)
		}
	}
	return next.Snapshot(), nil
}

// rawStorage is etcd storage of core-group objects under prefix, without
// a watch cache or a REST endpoint: the records the API server keeps for
// itself, as kube-apiserver keeps them (/registry/ranges,
// /registry/masterleases).
func rawStorage(optsGetter generic.RESTOptionsGetter, resource, prefix string, newFunc, newListFunc func() runtime.Object) (storage.Interface, func(), error) {
	opts, err := optsGetter.GetRESTOptions(schema.GroupResource{Resource: resource}, newFunc())
	if err != nil {
		return nil, nil, err
	}
	st, destroy, err := generic.NewRawStorage(opts.StorageConfig, newFunc, newListFunc, prefix)
	return st, destroy, err
}
