//lint:file-ignore SA1019 kube-apiserver keeps its leases as v1 Endpoints at /registry/masterleases; svcnet does the same

package apiserver

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/client-go/kubernetes"
)

// kube-apiserver's lease endpoint reconciler: every API server keeps a
// lease with a time to live under /registry/masterleases/<its address>
// and renews it every reconcile interval; default/kubernetes' endpoints
// are the addresses with a live lease. A server that dies stops renewing
// and leaves the endpoints when its lease expires; one that shuts down
// removes its lease and itself at once.
const (
	masterLeaseTTL       = 15 * time.Second
	masterLeaseInterval  = 10 * time.Second
	masterLeasesPrefix   = "/masterleases/"
	masterLeaseRemoveCap = 10 * time.Second
)

// masterLeases are the API servers' leases in etcd.
type masterLeases struct {
	st      storage.Interface
	destroy func()
	ttl     time.Duration
}

func newMasterLeases(optsGetter generic.RESTOptionsGetter, ttl time.Duration) (*masterLeases, error) {
	st, destroy, err := rawStorage(optsGetter, "endpoints", "/masterleases",
		func() runtime.Object { return &corev1.Endpoints{} },
		func() runtime.Object { return &corev1.EndpointsList{} })
	if err != nil {
		return nil, fmt.Errorf("storage of the API servers' leases: %w", err)
	}
	return &masterLeases{st: st, destroy: destroy, ttl: ttl}, nil
}

// renew writes (or refreshes) ip's lease.
func (m *masterLeases) renew(ctx context.Context, ip string) error {
	ttl := uint64(m.ttl / time.Second)
	return m.st.GuaranteedUpdate(ctx, masterLeasesPrefix+ip, &corev1.Endpoints{}, true, nil,
		func(in runtime.Object, _ storage.ResponseMeta) (runtime.Object, *uint64, error) {
			ep := in.(*corev1.Endpoints)
			// An unchanged object is not written, and its time to live
			// not renewed: change it each time, as kube-apiserver does.
			ep.Generation++
			ep.Name = ip
			ep.Subsets = []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: ip}}}}
			return ep, &ttl, nil
		}, nil)
}

// remove deletes ip's lease.
func (m *masterLeases) remove(ctx context.Context, ip string) error {
	err := m.st.Delete(ctx, masterLeasesPrefix+ip, &corev1.Endpoints{}, nil, storage.ValidateAllObjectFunc, nil, storage.DeleteOptions{})
	if storage.IsNotFound(err) {
		return nil
	}
	return err
}

// live lists the addresses with a lease, sorted.
func (m *masterLeases) live(ctx context.Context) ([]string, error) {
	list := &corev1.EndpointsList{}
	if err := m.st.GetList(ctx, masterLeasesPrefix, storage.ListOptions{Recursive: true, Predicate: storage.Everything, ResourceVersion: "0"}, list); err != nil {
		return nil, err
	}
	var ips []string
	for _, ep := range list.Items {
		for _, s := range ep.Subsets {
			for _, a := range s.Addresses {
				ips = append(ips, a.IP)
			}
		}
	}
	slices.Sort(ips)
	return slices.Compact(ips), nil
}

// endpointReconciler keeps default/kubernetes pointing at the live API
// servers.
type endpointReconciler struct {
	leases   *masterLeases
	ip       string
	b        *bootstrap
	interval time.Duration

	// mu orders the loop's reconciles and the last one at shutdown:
	// once stopped, no tick puts this server back.
	mu      sync.Mutex
	stopped bool
}

// reconcile renews this server's lease (unless it is leaving) and writes
// the endpoints of every live one.
func (r *endpointReconciler) reconcile(ctx context.Context, client kubernetes.Interface, leaving bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return nil
	}
	if leaving {
		r.stopped = true
		if err := r.leases.remove(ctx, r.ip); err != nil {
			return fmt.Errorf("remove the lease of %s: %w", r.ip, err)
		}
	} else if err := r.leases.renew(ctx, r.ip); err != nil {
		return fmt.Errorf("renew the lease of %s: %w", r.ip, err)
	}
	ips, err := r.leases.live(ctx)
	if err != nil {
		return fmt.Errorf("list the API servers' leases: %w", err)
	}
	if leaving {
		ips = slices.DeleteFunc(ips, func(ip string) bool { return ip == r.ip })
	}
	if len(ips) == 0 {
		// As kube-apiserver: never erase every endpoint. The last server
		// leaving is most likely restarting, and clients do better
		// waiting for it than being refused by the proxies.
		return nil
	}
	return r.b.ensureEndpoints(ctx, client, ips)
}

// run reconciles every interval until ctx ends.
func (r *endpointReconciler) run(ctx context.Context, client kubernetes.Interface) {
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		if err := r.reconcile(ctx, client, false); err != nil && ctx.Err() == nil {
			slog.Warn("reconcile default/kubernetes endpoints", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// leave takes this server out of the endpoints, at shutdown.
func (r *endpointReconciler) leave(client kubernetes.Interface) error {
	ctx, cancel := context.WithTimeout(context.Background(), masterLeaseRemoveCap)
	defer cancel()
	return r.reconcile(ctx, client, true)
}
