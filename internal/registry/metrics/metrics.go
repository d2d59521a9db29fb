// Package metrics serves metrics.k8s.io/v1beta1 (what `kubectl top`
// reads) from the node agents' summaries, as metrics-server serves it from
// kubelets': the API server asks the nodes when asked, nothing is stored.
package metrics

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/svcnet/svcnet/internal/node/stats"
	"github.com/svcnet/svcnet/internal/registry/core"
)

// Store is what the metrics read their objects from: the API server's
// node and pod storage.
type Store interface {
	rest.Lister
	rest.Getter
}

// Summaries fetches node agents' /stats/summary.
type Summaries struct {
	Nodes core.NodeConnection
}

// Get asks one node agent for its last summary.
func (s Summaries) Get(ctx context.Context, node string) (*stats.Summary, error) {
	if s.Nodes == nil {
		return nil, fmt.Errorf("no connection to node agents")
	}
	loc, err := s.Nodes.Location(ctx, node)
	if err != nil {
		return nil, err
	}
	loc.Path = "/stats/summary"
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, loc.String(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := (&http.Client{Transport: s.Nodes.Transport()}).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("node %s: summary: %s", node, resp.Status)
	}
	var sum stats.Summary
	if err := json.NewDecoder(resp.Body).Decode(&sum); err != nil {
		return nil, fmt.Errorf("node %s: summary: %w", node, err)
	}
	return &sum, nil
}

// summaries asks every node in names at once; nodes that do not answer
// are left out, as metrics-server leaves out nodes it cannot scrape.
func (s Summaries) all(ctx context.Context, names []string) map[string]*stats.Summary {
	out := map[string]*stats.Summary{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, n := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if sum, err := s.Get(ctx, n); err == nil {
				mu.Lock()
				out[n] = sum
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return out
}

func cpuQuantity(nanoCores uint64) resource.Quantity {
	return *resource.NewScaledQuantity(int64(nanoCores), resource.Nano)
}

func memQuantity(bytes uint64) resource.Quantity {
	return *resource.NewQuantity(int64(bytes), resource.BinarySI)
}

var (
	nodesResource = schema.GroupResource{Group: metricsv1beta1.GroupName, Resource: "nodes"}
	podsResource  = schema.GroupResource{Group: metricsv1beta1.GroupName, Resource: "pods"}
)

// NodeMetrics serves metrics.k8s.io/v1beta1 nodes.
type NodeMetrics struct {
	Nodes     Store
	Summaries Summaries
	rest.TableConvertor
}

// NewNodeMetrics serves node metrics from nodes' summaries.
func NewNodeMetrics(nodes Store, s Summaries) *NodeMetrics {
	return &NodeMetrics{Nodes: nodes, Summaries: s, TableConvertor: rest.NewDefaultTableConvertor(nodesResource)}
}

func (r *NodeMetrics) New() runtime.Object     { return &metricsv1beta1.NodeMetrics{} }
func (r *NodeMetrics) NewList() runtime.Object { return &metricsv1beta1.NodeMetricsList{} }
func (r *NodeMetrics) Destroy()                {}
func (r *NodeMetrics) NamespaceScoped() bool   { return false }
func (r *NodeMetrics) GetSingularName() string { return "node" }
func (r *NodeMetrics) Kind() string            { return "NodeMetrics" }

// List answers for the nodes the selectors pick that have been measured.
func (r *NodeMetrics) List(ctx context.Context, opts *metainternalversion.ListOptions) (runtime.Object, error) {
	obj, err := r.Nodes.List(ctx, &metainternalversion.ListOptions{LabelSelector: opts.LabelSelector, FieldSelector: opts.FieldSelector})
	if err != nil {
		return nil, err
	}
	nodes := obj.(*corev1.NodeList).Items
	var names []string
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	sums := r.Summaries.all(ctx, names)
	out := &metricsv1beta1.NodeMetricsList{}
	for _, n := range nodes {
		if m, ok := nodeMetrics(&n, sums[n.Name]); ok {
			out.Items = append(out.Items, m)
		}
	}
	return out, nil
}

// Get answers for one node.
func (r *NodeMetrics) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	obj, err := r.Nodes.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	n := obj.(*corev1.Node)
	sum, err := r.Summaries.Get(ctx, name)
	if err != nil {
		return nil, apierrors.NewNotFound(nodesResource, name)
	}
	m, ok := nodeMetrics(n, sum)
	if !ok {
		return nil, apierrors.NewNotFound(nodesResource, name)
	}
	return &m, nil
}

func nodeMetrics(n *corev1.Node, sum *stats.Summary) (metricsv1beta1.NodeMetrics, bool) {
	if sum == nil || sum.Node.CPU == nil || sum.Node.Memory == nil {
		return metricsv1beta1.NodeMetrics{}, false
	}
	return metricsv1beta1.NodeMetrics{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels, CreationTimestamp: metav1.Now()},
		Timestamp:  metav1.NewTime(sum.Node.CPU.Time),
		Window:     metav1.Duration{Duration: sum.Node.CPU.Window},
		Usage: corev1.ResourceList{
			corev1.ResourceCPU:    cpuQuantity(sum.Node.CPU.UsageNanoCores),
			corev1.ResourceMemory: memQuantity(sum.Node.Memory.WorkingSetBytes),
		},
	}, true
}

// PodMetrics serves metrics.k8s.io/v1beta1 pods.
type PodMetrics struct {
	Pods      Store
	Summaries Summaries
	rest.TableConvertor
}

// NewPodMetrics serves pod metrics from the summaries of their nodes.
func NewPodMetrics(pods Store, s Summaries) *PodMetrics {
	return &PodMetrics{Pods: pods, Summaries: s, TableConvertor: rest.NewDefaultTableConvertor(podsResource)}
}

func (r *PodMetrics) New() runtime.Object     { return &metricsv1beta1.PodMetrics{} }
func (r *PodMetrics) NewList() runtime.Object { return &metricsv1beta1.PodMetricsList{} }
func (r *PodMetrics) Destroy()                {}
func (r *PodMetrics) NamespaceScoped() bool   { return true }
func (r *PodMetrics) GetSingularName() string { return "pod" }
func (r *PodMetrics) Kind() string            { return "PodMetrics" }

// List answers for the running pods (of the request's namespace, or all)
// that the selectors pick and that have been measured.
func (r *PodMetrics) List(ctx context.Context, opts *metainternalversion.ListOptions) (runtime.Object, error) {
	obj, err := r.Pods.List(ctx, &metainternalversion.ListOptions{LabelSelector: opts.LabelSelector, FieldSelector: opts.FieldSelector})
	if err != nil {
		return nil, err
	}
	pods := obj.(*corev1.PodList).Items
	seen := map[string]bool{}
	var nodes []string
	for _, p := range pods {
		if p.Spec.NodeName != "" && !seen[p.Spec.NodeName] {
			seen[p.Spec.NodeName] = true
			nodes = append(nodes, p.Spec.NodeName)
		}
	}
	byUID := map[string]*stats.PodStats{}
	for _, sum := range r.Summaries.all(ctx, nodes) {
		for i := range sum.Pods {
			byUID[sum.Pods[i].PodRef.UID] = &sum.Pods[i]
		}
	}
	out := &metricsv1beta1.PodMetricsList{}
	for _, p := range pods {
		if m, ok := podMetrics(&p, byUID[string(p.UID)]); ok {
			out.Items = append(out.Items, m)
		}
	}
	return out, nil
}

// Get answers for one pod.
func (r *PodMetrics) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	obj, err := r.Pods.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	p := obj.(*corev1.Pod)
	ns, _ := genericapirequest.NamespaceFrom(ctx)
	notFound := apierrors.NewNotFound(podsResource, ns+"/"+name)
	if p.Spec.NodeName == "" {
		return nil, notFound
	}
	sum, err := r.Summaries.Get(ctx, p.Spec.NodeName)
	if err != nil {
		return nil, notFound
	}
	for i := range sum.Pods {
		if sum.Pods[i].PodRef.UID == string(p.UID) {
			if m, ok := podMetrics(p, &sum.Pods[i]); ok {
				return &m, nil
			}
		}
	}
	return nil, notFound
}

func podMetrics(p *corev1.Pod, ps *stats.PodStats) (metricsv1beta1.PodMetrics, bool) {
	if ps == nil || ps.CPU == nil {
		return metricsv1beta1.PodMetrics{}, false
	}
	m := metricsv1beta1.PodMetrics{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, Labels: p.Labels, CreationTimestamp: metav1.Now()},
		Timestamp:  metav1.NewTime(ps.CPU.Time),
		Window:     metav1.Duration{Duration: ps.CPU.Window},
	}
	for _, c := range ps.Containers {
		if c.CPU == nil || c.Memory == nil {
			return metricsv1beta1.PodMetrics{}, false
		}
		m.Containers = append(m.Containers, metricsv1beta1.ContainerMetrics{Name: c.Name, Usage: corev1.ResourceList{
			corev1.ResourceCPU:    cpuQuantity(c.CPU.UsageNanoCores),
			corev1.ResourceMemory: memQuantity(c.Memory.WorkingSetBytes),
		}})
	}
	return m, true
}

var (
	_ rest.Lister               = (*NodeMetrics)(nil)
	_ rest.Getter               = (*NodeMetrics)(nil)
	_ rest.SingularNameProvider = (*NodeMetrics)(nil)
	_ rest.Lister               = (*PodMetrics)(nil)
	_ rest.Getter               = (*PodMetrics)(nil)
	_ rest.KindProvider         = (*PodMetrics)(nil)
	_ rest.Scoper               = (*PodMetrics)(nil)
)
