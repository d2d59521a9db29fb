package node

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/svcnet/svcnet/internal/imagestore"
	"github.com/svcnet/svcnet/internal/imagestore/imagetest"
	"github.com/svcnet/svcnet/internal/imagestore/registrytest"
	"github.com/svcnet/svcnet/internal/node/pods"
	noderuntime "github.com/svcnet/svcnet/internal/node/runtime"
	"github.com/svcnet/svcnet/internal/node/users"
)

// pushBusybox puts an image of busybox that runs cmd into the registry
// as repo:tag.
func pushBusybox(t *testing.T, reg *registrytest.Registry, repoTag string, cmd ...string) {
	t.Helper()
	img := imagetest.Image(t, v1.Config{Cmd: cmd, Env: []string{"PATH=/bin"}}, nil, imagetest.LayerOf(t, imagetest.Busybox(t)))
	reg.Push(t, repoTag, img)
}

// ownNetwork gives each pod the test's own network namespace: the test
// needs no network, and makes no namespaces.
type ownNetwork struct{}

func (ownNetwork) Setup(string) (netip.Addr, string, error) {
	return netip.MustParseAddr("10.244.0.7"), fmt.Sprintf("/proc/%d/ns/net", os.Getpid()), nil
}
func (ownNetwork) Teardown(string) {}

// testAgent is an agent as the pod workers see it: a fake API with
// objs, the events kept, the pods' containers run from store in the
// test's own network namespace.
func testAgent(t *testing.T, store *imagestore.Store, objs ...k8sruntime.Object) (*Agent, *record.FakeRecorder) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset(objs...)
	rec := record.NewFakeRecorder(100)
	stateDir := t.TempDir()
	// The pods' namespaces, held by files, go before their directories.
	t.Cleanup(func() { _ = noderuntime.ReleaseNamespaces(stateDir) })
	a := &Agent{cfg: Config{NodeName: "node-1", NodeIP: netip.MustParseAddr("10.0.0.1"), StateDir: stateDir},
		client: client, recorder: rec, store: store, workers: map[types.UID]*podWorker{},
		services: corelisters.NewServiceLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc,
			cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}))}
	a.pods = pods.Runtime{Self: self, NodeIP: a.cfg.NodeIP, ClusterDNS: "10.96.0.10", ClusterDomain: "cluster.local",
		Net: ownNetwork{}, Volumes: apiSource{client}, Node: a, Images: store}
	if a.pods.Users, err = users.Open(filepath.Join(stateDir, "users")); err != nil {
		t.Fatal(err)
	}
	return a, rec
}

// runPod creates pod in the agent's API and runs its worker until the
// test ends; the returned channel closes when the worker returns.
func runPod(t *testing.T, a *Agent, pod *corev1.Pod) (*podWorker, <-chan struct{}) {
	t.Helper()
	if _, err := a.client.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := newPodWorker(a, pod)
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		a.killContainers(string(pod.UID))
	})
	return w, done
}

// awaitStatus waits until the pod's status in the API satisfies ok.
func awaitStatus(t *testing.T, a *Agent, pod *corev1.Pod, what string, ok func(*corev1.PodStatus) bool) *corev1.PodStatus {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		p, err := a.client.CoreV1().Pods(pod.Namespace).Get(context.Background(), pod.Name, metav1.GetOptions{})
		if err == nil && ok(&p.Status) {
			return &p.Status
		}
		if time.Now().After(deadline) {
			var st any
			if p != nil {
				st = p.Status
			}
			t.Fatalf("no %s; status %+v", what, st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitingReason is the waiting reason of the pod's first container.
func waitingReason(st *corev1.PodStatus) string {
	if len(st.ContainerStatuses) == 0 || st.ContainerStatuses[0].State.Waiting == nil {
		return ""
	}
	return st.ContainerStatuses[0].State.Waiting.Reason
}

// drainEvents returns the events recorded so far, "Type Reason Message".
func drainEvents(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// hasEvents checks that events holds each of want (prefixes) in order.
func hasEvents(t *testing.T, events []string, want ...string) {
	t.Helper()
	at := 0
	for _, w := range want {
		for at < len(events) && !strings.HasPrefix(events[at], w) {
			at++
		}
		if at == len(events) {
			t.Fatalf("events lack %q (in order):\n%s", w, strings.Join(events, "\n"))
		}
		at++
	}
}

func testPod(i int, image string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprint("p", i),
			UID: types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i))},
		Spec: corev1.PodSpec{NodeName: "node-1", RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "c", Image: image}}},
	}
	for _, m := range mutate {
		m(pod)
	}
	return pod
}

func dockerConfig(host, userPass string) []byte {
	auth := base64.StdEncoding.EncodeToString([]byte(userPass))
	return []byte(fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, host, auth))
}
