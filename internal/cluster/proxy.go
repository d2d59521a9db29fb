package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/deploy"
	"github.com/svcnet/svcnet/internal/bpflb"
	"github.com/svcnet/svcnet/internal/proxy/app"
)

// ProxyModeNone is `svcnet up --proxy-mode none`: no service proxy, as
// kubeadm without its kube-proxy add-on; the user installs one.
const ProxyModeNone = "none"

// ProxyName is the proxy DaemonSet's name and its pods' k8s-app label,
// kube-proxy's.
const ProxyName = "kube-proxy"

// proxyAddon is the node proxy add-on's objects: deploy/'s
// kube-proxy.yaml as a user applies it, with what only this cluster
// has added to the container's command (its service range, for the
// nftables mode's drop of unallocated cluster IPs, and the iptables
// command the user chose).
func (s *supervisor) proxyAddon(api netip.AddrPort) ([]runtime.Object, error) {
	return proxyObjects(s.opts.Name, s.opts.ProxyMode, "https://"+api.String(), s.plan.ClusterCIDR.String(), s.plan.ServiceCIDR.String(), s.iptables())
}

// NodeCgroup is the cgroup v2 group of cluster's node, below which its
// agent puts every container ("" where the machine mounts no cgroup2
// hierarchy): named as the node's network namespace.
func NodeCgroup(cluster, node string) string {
	mount, err := bpflb.Cgroup2Mount()
	if err != nil {
		return ""
	}
	return filepath.Join(mount, NetnsPrefix(cluster)+node)
}

// removeCgroups removes the cluster's node groups and their containers'
// groups, their processes gone (a process just killed leaves its group
// a moment later).
func removeCgroups(cluster string) error {
	mount, err := bpflb.Cgroup2Mount()
	if err != nil {
		return nil
	}
	nodes, _ := filepath.Glob(filepath.Join(mount, NetnsPrefix(cluster)+"*"))
	var errs []error
	for _, n := range nodes {
		groups, _ := filepath.Glob(filepath.Join(n, "svcnet-*"))
		for _, dir := range append(groups, n) {
			err := os.Remove(dir)
			for i := 0; i < 50 && errors.Is(err, syscall.EBUSY); i++ {
				time.Sleep(20 * time.Millisecond)
				err = os.Remove(dir)
			}
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// proxyObjects renders the proxy add-on for a cluster.
func proxyObjects(cluster, mode, apiServer, clusterCIDR, serviceCIDR, iptables string) ([]runtime.Object, error) {
	c, err := deploy.Lookup("proxy")
	if err != nil {
		return nil, err
	}
	v := deploy.Defaults()
	v.APIServer, v.ClusterCIDR, v.ProxyMode = apiServer, clusterCIDR, mode
	objs, err := c.Objects(v.Map())
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		if ds, ok := o.(*appsv1.DaemonSet); ok && ds.Name == ProxyName {
			ctr := &ds.Spec.Template.Spec.Containers[0]
			o := app.Defaults()
			o.ServiceCIDRs, o.IPTablesBinary = serviceCIDR, iptables
			if mode == "ebpf" {
				// The node's group, as the DaemonSet's pod on it names it.
				o.EBPFCgroup = NodeCgroup(cluster, "$(NODE_NAME)")
			}
			ctr.Command = append(ctr.Command, o.Args()...)
			return objs, nil
		}
	}
	return nil, fmt.Errorf("deploy/%s has no DaemonSet %s", c.File, ProxyName)
}

// installProxy installs the proxy add-on and waits until it runs,
// ready, on every node.
func (s *supervisor) installProxy(ctx context.Context, c kubernetes.Interface, api netip.AddrPort) error {
	if s.opts.ProxyMode == ProxyModeNone {
		return nil
	}
	objs, err := s.proxyAddon(api)
	if err != nil {
		return fmt.Errorf("proxy add-on: %w", err)
	}
	if err := deploy.Create(ctx, c, objs); err != nil {
		return fmt.Errorf("proxy add-on: %w", err)
	}
	if err := waitDaemonSet(ctx, c, "kube-system", ProxyName, s.opts.stepWait()); err != nil {
		return fmt.Errorf("service proxy not ready on every node in %s: kubectl -n kube-system describe pods -l k8s-app=%s", s.opts.stepWait(), ProxyName)
	}
	return nil
}

// waitDaemonSet waits until every pod the DaemonSet wants is of its
// current template and ready.
func waitDaemonSet(ctx context.Context, c kubernetes.Interface, ns, name string, timeout time.Duration) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ds, err := c.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		st := ds.Status
		return st.ObservedGeneration >= ds.Generation && st.DesiredNumberScheduled > 0 &&
			st.UpdatedNumberScheduled == st.DesiredNumberScheduled && st.NumberReady == st.DesiredNumberScheduled, nil
	})
}
