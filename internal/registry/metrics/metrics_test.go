package metrics

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/svcnet/svcnet/internal/node/stats"
)

// store is an in-memory Store of nodes or pods.
type store struct {
	rest.TableConvertor
	items    []runtime.Object
	newList  func() runtime.Object
	resource string
	listed   *metainternalversion.ListOptions
}

func (s *store) NewList() runtime.Object { return s.newList() }

func (s *store) List(ctx context.Context, opts *metainternalversion.ListOptions) (runtime.Object, error) {
	s.listed = opts
	ns, _ := genericapirequest.NamespaceFrom(ctx)
	var out []runtime.Object
	for _, o := range s.items {
		m, _ := meta.Accessor(o)
		if (ns == "" || m.GetNamespace() == ns) && (opts.LabelSelector == nil || opts.LabelSelector.Matches(labels.Set(m.GetLabels()))) {
			out = append(out, o.DeepCopyObject())
		}
	}
	list := s.newList()
	if err := meta.SetList(list, out); err != nil {
		return nil, err
	}
	return list, nil
}

func (s *store) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	ns, _ := genericapirequest.NamespaceFrom(ctx)
	for _, o := range s.items {
		if m, _ := meta.Accessor(o); m.GetName() == name && m.GetNamespace() == ns {
			return o.DeepCopyObject(), nil
		}
	}
	return nil, apierrors.NewNotFound(corev1.Resource(s.resource), name)
}

// agents serves each node's /stats/summary from its own server.
type agents struct {
	servers map[string]*httptest.Server
}

func (a *agents) Location(_ context.Context, node string) (*url.URL, error) {
	srv, ok := a.servers[node]
	if !ok {
		return nil, fmt.Errorf("node %s has no address", node)
	}
	return url.Parse(srv.URL)
}

func (a *agents) Transport() http.RoundTripper { return http.DefaultTransport }

// newAgents starts a node agent per summary; a nil summary answers 500,
// and node "garbled" answers something that is not JSON.
func newAgents(t *testing.T, sums map[string]*stats.Summary) *agents {
	t.Helper()
	a := &agents{servers: map[string]*httptest.Server{}}
	for node, sum := range sums {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case r.URL.Path != "/stats/summary":
				http.NotFound(w, r)
			case node == "garbled":
				fmt.Fprint(w, "<html>")
			case sum == nil:
				http.Error(w, "no summary yet", http.StatusInternalServerError)
			default:
				_ = json.NewEncoder(w).Encode(sum)
			}
		}))
		t.Cleanup(srv.Close)
		a.servers[node] = srv
	}
	return a
}

var (
	sampled = time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	window  = 15 * time.Second
)

func cpu(nanoCores uint64) *stats.CPUStats {
	return &stats.CPUStats{Time: sampled, Window: window, UsageNanoCores: nanoCores}
}

func mem(bytes uint64) *stats.MemoryStats {
	return &stats.MemoryStats{Time: sampled, WorkingSetBytes: bytes}
}

func podStats(ns, name, uid string, containers ...stats.ContainerStats) stats.PodStats {
	return stats.PodStats{PodRef: stats.PodReference{Name: name, Namespace: ns, UID: uid}, CPU: cpu(0), Memory: mem(0), Containers: containers}
}

// cluster: node-1 measured with pods; node-2 only sampled once (no CPU
// rate yet); node-3 down; garbled answering nonsense.
func cluster(t *testing.T) *agents {
	return newAgents(t, map[string]*stats.Summary{
		"node-1": {
			Node: stats.NodeStats{NodeName: "node-1", CPU: cpu(1_250_000_000), Memory: mem(2 << 30)},
			Pods: []stats.PodStats{
				podStats("default", "web", "uid-web",
					stats.ContainerStats{Name: "nginx", CPU: cpu(5_000_000), Memory: mem(64 << 20)},
					stats.ContainerStats{Name: "log", CPU: cpu(500_000), Memory: mem(8 << 20)}),
				podStats("default", "starting", "uid-starting", stats.ContainerStats{Name: "app", Memory: mem(1 << 20)}),
				podStats("kube-system", "dns", "uid-dns", stats.ContainerStats{Name: "coredns", CPU: cpu(2_000_000), Memory: mem(20 << 20)}),
			},
		},
		"node-2":  {Node: stats.NodeStats{NodeName: "node-2", Memory: mem(1 << 30)}},
		"node-3":  nil,
		"garbled": {},
	})
}

func TestSummariesGet(t *testing.T) {
	a := cluster(t)
	cases := []struct {
		node    string
		nodes   *agents
		wantErr bool
	}{
		{"node-1", a, false},
		{"node-2", a, false},
		{"node-3", a, true},
		{"garbled", a, true},
		{"node-9", a, true},
		{"node-1", nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.node, func(t *testing.T) {
			s := Summaries{}
			if tc.nodes != nil {
				s.Nodes = tc.nodes
			}
			sum, err := s.Get(context.Background(), tc.node)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error: %v", err, tc.wantErr)
			}
			if err == nil && sum.Node.NodeName != tc.node {
				t.Errorf("summary of %q", sum.Node.NodeName)
			}
		})
	}
}

func nodes() *store {
	node := func(name string, lbls map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls}}
	}
	return &store{
		items: []runtime.Object{
			node("node-1", map[string]string{"zone": "a"}), node("node-2", map[string]string{"zone": "a"}),
			node("node-3", map[string]string{"zone": "b"}), node("node-4", nil),
		},
		newList:  func() runtime.Object { return &corev1.NodeList{} },
		resource: "nodes",
	}
}

func quantityIs(q resource.Quantity, want string) bool { return q.Cmp(resource.MustParse(want)) == 0 }

func TestNodeMetricsGet(t *testing.T) {
	r := NewNodeMetrics(nodes(), Summaries{Nodes: cluster(t)})
	cases := []struct {
		node     string
		notFound bool
	}{
		{"node-1", false},
		{"node-2", true}, // no CPU rate yet
		{"node-3", true}, // agent down
		{"node-4", true}, // no agent
		{"node-9", true}, // no such node
	}
	for _, tc := range cases {
		t.Run(tc.node, func(t *testing.T) {
			obj, err := r.Get(context.Background(), tc.node, &metav1.GetOptions{})
			if tc.notFound {
				if !apierrors.IsNotFound(err) {
					t.Fatalf("error %v, want NotFound", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			m := obj.(*metricsv1beta1.NodeMetrics)
			if m.Name != tc.node || m.Labels["zone"] != "a" || !m.Timestamp.Time.Equal(sampled) || m.Window.Duration != window {
				t.Errorf("metrics %+v", m)
			}
			if !quantityIs(m.Usage[corev1.ResourceCPU], "1250m") || !quantityIs(m.Usage[corev1.ResourceMemory], "2Gi") {
				t.Errorf("usage %v", m.Usage)
			}
		})
	}
}

func TestNodeMetricsList(t *testing.T) {
	cases := []struct {
		name     string
		selector labels.Selector
		want     []string
	}{
		{"all measured nodes", nil, []string{"node-1"}},
		{"zone a", labels.SelectorFromSet(labels.Set{"zone": "a"}), []string{"node-1"}},
		{"zone b", labels.SelectorFromSet(labels.Set{"zone": "b"}), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := nodes()
			r := NewNodeMetrics(s, Summaries{Nodes: cluster(t)})
			obj, err := r.List(context.Background(), &metainternalversion.ListOptions{LabelSelector: tc.selector})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range obj.(*metricsv1beta1.NodeMetricsList).Items {
				got = append(got, m.Name)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("listed %q, want %q", got, tc.want)
			}
			if fmt.Sprint(s.listed.LabelSelector) != fmt.Sprint(tc.selector) {
				t.Errorf("nodes listed with selector %v, want %v", s.listed.LabelSelector, tc.selector)
			}
		})
	}
}

func pods() *store {
	pod := func(ns, name, uid, node string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid), Labels: map[string]string{"app": name}},
			Spec: corev1.PodSpec{NodeName: node}}
	}
	return &store{
		items: []runtime.Object{
			pod("default", "web", "uid-web", "node-1"),
			pod("default", "starting", "uid-starting", "node-1"),
			pod("default", "pending", "uid-pending", ""),
			pod("default", "gone", "uid-gone", "node-1"), // not in the summary
			pod("default", "down", "uid-down", "node-3"),
			pod("kube-system", "dns", "uid-dns", "node-1"),
		},
		newList:  func() runtime.Object { return &corev1.PodList{} },
		resource: "pods",
	}
}

func TestPodMetricsGet(t *testing.T) {
	r := NewPodMetrics(pods(), Summaries{Nodes: cluster(t)})
	for _, name := range []string{"pending", "starting", "gone", "down", "nowhere"} {
		t.Run(name, func(t *testing.T) {
			_, err := r.Get(genericapirequest.WithNamespace(context.Background(), "default"), name, &metav1.GetOptions{})
			if !apierrors.IsNotFound(err) {
				t.Fatalf("error %v, want NotFound", err)
			}
		})
	}
	t.Run("web", func(t *testing.T) {
		obj, err := r.Get(genericapirequest.WithNamespace(context.Background(), "default"), "web", &metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		m := obj.(*metricsv1beta1.PodMetrics)
		if m.Name != "web" || m.Namespace != "default" || m.Labels["app"] != "web" || !m.Timestamp.Time.Equal(sampled) || m.Window.Duration != window {
			t.Errorf("metrics %+v", m.ObjectMeta)
		}
		want := map[string][2]string{"nginx": {"5m", "64Mi"}, "log": {"500u", "8Mi"}}
		if len(m.Containers) != len(want) {
			t.Fatalf("containers %+v", m.Containers)
		}
		for _, c := range m.Containers {
			w := want[c.Name]
			if !quantityIs(c.Usage[corev1.ResourceCPU], w[0]) || !quantityIs(c.Usage[corev1.ResourceMemory], w[1]) {
				t.Errorf("container %s: usage %v, want cpu %s memory %s", c.Name, c.Usage, w[0], w[1])
			}
		}
	})
	t.Run("not found names the namespace", func(t *testing.T) {
		_, err := r.Get(genericapirequest.WithNamespace(context.Background(), "default"), "pending", &metav1.GetOptions{})
		if d := err.(apierrors.APIStatus).Status().Details; d == nil || d.Name != "default/pending" || d.Group != metricsv1beta1.GroupName {
			t.Errorf("details %+v", d)
		}
	})
}

func TestPodMetricsList(t *testing.T) {
	cases := []struct {
		name     string
		ns       string
		selector labels.Selector
		want     []string
	}{
		{"default namespace", "default", nil, []string{"default/web"}},
		{"all namespaces", "", nil, []string{"default/web", "kube-system/dns"}},
		{"by label", "", labels.SelectorFromSet(labels.Set{"app": "dns"}), []string{"kube-system/dns"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := NewPodMetrics(pods(), Summaries{Nodes: cluster(t)})
			obj, err := r.List(genericapirequest.WithNamespace(context.Background(), tc.ns), &metainternalversion.ListOptions{LabelSelector: tc.selector})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range obj.(*metricsv1beta1.PodMetricsList).Items {
				got = append(got, m.Namespace+"/"+m.Name)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("listed %q, want %q", got, tc.want)
			}
		})
	}
}
