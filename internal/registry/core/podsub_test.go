package core

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	genericrest "k8s.io/apiserver/pkg/registry/generic/rest"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

// agents locates each node's agent at https://<node>:10250; node-down
// has no address.
type agents struct{}

func (agents) Location(_ context.Context, node string) (*url.URL, error) {
	if node == "node-down" {
		return nil, apierrors.NewServiceUnavailable("node-down has no address")
	}
	return &url.URL{Scheme: "https", Host: node + ":10250"}, nil
}

func (agents) Transport() http.RoundTripper { return http.DefaultTransport }

func podOn(name, node string, phase corev1.PodPhase, containers ...string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       corev1.PodSpec{NodeName: node, InitContainers: []corev1.Container{{Name: "init", Image: "busybox"}}},
		Status:     corev1.PodStatus{Phase: phase},
	}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c, Image: "nginx"})
	}
	return p
}

func podStore() *genericregistry.Store {
	s, _ := memStore(Pod,
		podOn("web", "node-1", corev1.PodRunning, "nginx"),
		podOn("two", "node-1", corev1.PodRunning, "nginx", "log"),
		podOn("pending", "", corev1.PodPending, "nginx"),
		podOn("done", "node-1", corev1.PodSucceeded, "nginx"),
		podOn("failed", "node-1", corev1.PodFailed, "nginx"),
		podOn("starting", "node-1", corev1.PodPending, "nginx"),
		podOn("lost", "node-down", corev1.PodRunning, "nginx"),
	)
	return s
}

func podCtx() context.Context {
	return genericapirequest.WithNamespace(context.Background(), "default")
}

func TestDefaultContainer(t *testing.T) {
	cases := []struct {
		name      string
		pod       *corev1.Pod
		container string
		want      string // "" for a BadRequest
	}{
		{"the only container", podOn("web", "n", corev1.PodRunning, "nginx"), "", "nginx"},
		{"named", podOn("two", "n", corev1.PodRunning, "nginx", "log"), "log", "log"},
		{"init container", podOn("web", "n", corev1.PodRunning, "nginx"), "init", "init"},
		{"two, none named", podOn("two", "n", corev1.PodRunning, "nginx", "log"), "", ""},
		{"unknown", podOn("web", "n", corev1.PodRunning, "nginx"), "../../etc", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := defaultContainer(tc.pod, tc.container)
			if tc.want == "" {
				if !apierrors.IsBadRequest(err) {
					t.Fatalf("container %q, error %v; want BadRequest", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("container %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	_, err := defaultContainer(podOn("two", "n", corev1.PodRunning, "nginx", "log"), "")
	if err == nil || !strings.Contains(err.Error(), "choose one of: [nginx log]") {
		t.Errorf("error %v does not list the containers", err)
	}
}

func TestLogREST(t *testing.T) {
	since := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("CET", 3600)))
	cases := []struct {
		name  string
		pod   string
		opts  corev1.PodLogOptions
		nodes NodeConnection
		check func(error) bool // the error wanted; nil for none
		path  string
		query url.Values
	}{
		{"only container", "web", corev1.PodLogOptions{}, agents{}, nil, "/containerLogs/default/web/nginx", url.Values{}},
		{"every option", "two", corev1.PodLogOptions{Container: "log", Follow: true, Previous: true, Timestamps: true,
			TailLines: ptr.To[int64](10), LimitBytes: ptr.To[int64](4096), SinceSeconds: ptr.To[int64](60), SinceTime: &since}, agents{}, nil,
			"/containerLogs/default/two/log", url.Values{"follow": {"true"}, "previous": {"true"}, "timestamps": {"true"}, "tailLines": {"10"},
				"limitBytes": {"4096"}, "sinceSeconds": {"60"}, "sinceTime": {"2026-01-02T02:04:05Z"}}},
		{"init container", "web", corev1.PodLogOptions{Container: "init"}, agents{}, nil, "/containerLogs/default/web/init", url.Values{}},
		{"no container named", "two", corev1.PodLogOptions{}, agents{}, apierrors.IsBadRequest, "", nil},
		{"unknown container", "web", corev1.PodLogOptions{Container: "sidecar"}, agents{}, apierrors.IsBadRequest, "", nil},
		{"not scheduled", "pending", corev1.PodLogOptions{}, agents{}, apierrors.IsBadRequest, "", nil},
		{"no such pod", "gone", corev1.PodLogOptions{}, agents{}, apierrors.IsNotFound, "", nil},
		{"node without address", "lost", corev1.PodLogOptions{}, agents{}, apierrors.IsServiceUnavailable, "", nil},
		{"no connection to nodes", "web", corev1.PodLogOptions{}, nil, apierrors.IsServiceUnavailable, "", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := &LogREST{PodNode: PodNode{Pods: podStore(), Nodes: tc.nodes}}
			obj, err := r.Get(podCtx(), tc.pod, &tc.opts)
			if registrytest.ExpectError(t, err, tc.check) {
				return
			}
			s := obj.(*genericrest.LocationStreamer)
			if s.Location.Host != "node-1:10250" || s.Location.Path != tc.path || s.ContentType != "text/plain" || s.Flush != tc.opts.Follow {
				t.Errorf("streams %s (%s, flush %v)", s.Location, s.ContentType, s.Flush)
			}
			if q := s.Location.Query(); q.Encode() != tc.query.Encode() {
				t.Errorf("query %q, want %q", q.Encode(), tc.query.Encode())
			}
		})
	}
}

func TestExecAndAttach(t *testing.T) {
	cases := []struct {
		name    string
		pod     string
		command []string
		nodes   NodeConnection
		check   func(error) bool // the error wanted; nil for none
	}{
		{"running pod", "web", []string{"sh"}, agents{}, nil},
		{"pending pod on its node", "starting", []string{"sh"}, agents{}, nil},
		{"succeeded pod", "done", []string{"sh"}, agents{}, apierrors.IsBadRequest},
		{"failed pod", "failed", []string{"sh"}, agents{}, apierrors.IsBadRequest},
		{"not scheduled", "pending", []string{"sh"}, agents{}, apierrors.IsBadRequest},
		{"no container named", "two", []string{"sh"}, agents{}, apierrors.IsBadRequest},
		{"no such pod", "gone", []string{"sh"}, agents{}, apierrors.IsNotFound},
		{"no connection to nodes", "web", []string{"sh"}, nil, apierrors.IsServiceUnavailable},
	}
	for _, tc := range cases {
		t.Run("exec/"+tc.name, func(t *testing.T) {
			h, err := (&ExecREST{PodNode: PodNode{Pods: podStore(), Nodes: tc.nodes}}).Connect(podCtx(), tc.pod, &corev1.PodExecOptions{Command: tc.command, Stdout: true}, nil)
			checkConnect(t, h, err, tc.check)
		})
		t.Run("attach/"+tc.name, func(t *testing.T) {
			h, err := (&AttachREST{PodNode: PodNode{Pods: podStore(), Nodes: tc.nodes}}).Connect(podCtx(), tc.pod, &corev1.PodAttachOptions{Stdout: true}, nil)
			checkConnect(t, h, err, tc.check)
		})
	}
	t.Run("exec without a command", func(t *testing.T) {
		_, err := (&ExecREST{PodNode: PodNode{Pods: podStore(), Nodes: agents{}}}).Connect(podCtx(), "web", &corev1.PodExecOptions{}, nil)
		if !apierrors.IsBadRequest(err) {
			t.Errorf("error %v, want BadRequest", err)
		}
	})
}

func checkConnect(t *testing.T, h http.Handler, err error, check func(error) bool) {
	t.Helper()
	if check != nil {
		if !check(err) {
			t.Fatalf("error %v", err)
		}
		return
	}
	if err != nil || h == nil {
		t.Fatalf("handler %v, error %v", h, err)
	}
}

func TestPortForward(t *testing.T) {
	cases := []struct {
		name  string
		pod   string
		nodes NodeConnection
		check func(error) bool
	}{
		{"running pod", "web", agents{}, nil},
		{"pending pod", "starting", agents{}, apierrors.IsBadRequest},
		{"succeeded pod", "done", agents{}, apierrors.IsBadRequest},
		{"not scheduled", "pending", agents{}, apierrors.IsBadRequest},
		{"no such pod", "gone", agents{}, apierrors.IsNotFound},
		{"node without address", "lost", agents{}, apierrors.IsServiceUnavailable},
		{"no connection to nodes", "web", nil, apierrors.IsServiceUnavailable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, err := (&PortForwardREST{PodNode: PodNode{Pods: podStore(), Nodes: tc.nodes}}).Connect(podCtx(), tc.pod, &corev1.PodPortForwardOptions{Ports: []int32{8080}}, nil)
			checkConnect(t, h, err, tc.check)
		})
	}
}
