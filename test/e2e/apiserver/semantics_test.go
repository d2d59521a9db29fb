package apiserver_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/test/e2e/framework"
)

func configMap(name string, labels map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Data: map[string]string{"k": name}}
}

// TestContentTypes reads and writes, lists and watches with protobuf and
// with JSON clients.
func TestContentTypes(t *testing.T) {
	s := framework.SharedAPIServer(t)
	for _, ct := range []string{"application/vnd.kubernetes.protobuf", "application/json"} {
		t.Run(ct, func(t *testing.T) {
			cfg := s.Config("admin")
			cfg.ContentType, cfg.AcceptContentTypes = ct, ct
			c, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx := framework.Context(t, time.Minute)
			// The namespace too is written in the content type.
			ns := framework.UniqueName("e2e-ct-" + map[bool]string{true: "proto", false: "json"}[strings.Contains(ct, "protobuf")])
			if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
			// Only the test's own: the namespace also gets kube-root-ca.crt.
			mine := metav1.ListOptions{FieldSelector: "metadata.name=a"}
			w, err := c.CoreV1().ConfigMaps(ns).Watch(ctx, mine)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			if _, err := c.CoreV1().ConfigMaps(ns).Create(ctx, configMap("a", nil), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			select {
			case ev := <-w.ResultChan():
				if ev.Type != watch.Added || ev.Object.(*corev1.ConfigMap).Data["k"] != "a" {
					t.Errorf("watch event %v %+v", ev.Type, ev.Object)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no watch event")
			}
			l, err := c.CoreV1().ConfigMaps(ns).List(ctx, mine)
			if err != nil || len(l.Items) != 1 {
				t.Fatalf("list: %v %d items", err, len(l.Items))
			}
		})
	}
}

// TestStreamingList asks for a list as a watch stream (sendInitialEvents),
// as client-go informers do, and expects the initial-events-end bookmark.
func TestStreamingList(t *testing.T) {
	s := framework.SharedAPIServer(t)
	c := s.Client()
	ctx := framework.Context(t, time.Minute)
	ns := s.CreateNamespace("streaming")
	for i := range 5 {
		if _, err := c.CoreV1().ConfigMaps(ns).Create(ctx, configMap(fmt.Sprintf("cm-%d", i), map[string]string{"test": "streaming"}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	w, err := c.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{
		// The test's own (the namespace also holds kube-root-ca.crt).
		LabelSelector:        "test=streaming",
		SendInitialEvents:    ptr.To(true),
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		AllowWatchBookmarks:  true,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	added := 0
	for ev := range w.ResultChan() {
		switch ev.Type {
		case watch.Added:
			added++
		case watch.Bookmark:
			m, _ := ev.Object.(*corev1.ConfigMap)
			if m != nil && m.Annotations[metav1.InitialEventsAnnotationKey] == "true" {
				if added != 5 {
					t.Fatalf("initial-events-end after %d ADDED events, want 5", added)
				}
				return
			}
		}
	}
	t.Fatal("watch ended without the initial-events-end bookmark")
}

// TestInformerSurvivesRestart keeps a client-go informer on Services while
// the server restarts: it reconnects and resumes its watch instead of
// listing everything again.
func TestInformerSurvivesRestart(t *testing.T) {
	s := framework.StartAPIServer(t) // its own: it restarts the server
	c := s.Client()
	ctx := framework.Context(t, 3*time.Minute)
	for i := range 100 {
		if _, err := c.CoreV1().Services("default").Create(ctx, nodePortService(fmt.Sprintf("svc-%d", i)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var adds, updates, deletes atomic.Int64
	factory := informers.NewSharedInformerFactory(c, 0)
	inf := factory.Core().V1().Services().Informer()
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { adds.Add(1) },
		UpdateFunc: func(any, any) { updates.Add(1) },
		DeleteFunc: func(any) { deletes.Add(1) },
	})
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	// The registration's HasSynced covers delivery to the handler too.
	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		t.Fatal("informer did not sync")
	}
	if adds.Load() != 101 {
		t.Fatalf("%d adds at start, want 101", adds.Load())
	}

	s.Restart()
	if _, err := c.CoreV1().Services("default").Create(ctx, nodePortService("after-restart"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Handlers run after the store is updated: wait for the handler.
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return adds.Load() >= 102, nil
	})
	if err != nil {
		t.Fatal("the informer did not see a service created after the restart")
	}
	// A relist would have replayed every known service as an update.
	if u, d, a := updates.Load(), deletes.Load(), adds.Load(); u != 0 || d != 0 || a != 102 {
		t.Errorf("after restart: %d adds, %d updates, %d deletes; want 102, 0, 0 (no relist)", a, u, d)
	}
}

// rawClient sends hand-made requests with admin credentials.
func rawClient(t *testing.T, s *framework.APIServer) *http.Client {
	t.Helper()
	tlsCfg, err := rest.TLSConfigFor(s.Config("admin"))
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg}}
}

// TestBadInput sends what a broken client might, and expects a Status with
// the right code, and the stored data unharmed.
func TestBadInput(t *testing.T) {
	s := framework.SharedAPIServer(t)
	hc := rawClient(t, s)
	c := s.Client()
	ctx := framework.Context(t, time.Minute)
	ns := s.CreateNamespace("badinput")
	nowhere := framework.UniqueName("e2e-nowhere") // never created
	if _, err := c.CoreV1().ConfigMaps(ns).Create(ctx, configMap("keep", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	huge := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"huge"},"data":{"k":"` + strings.Repeat("x", 4<<20) + `"}}`
	cases := []struct {
		name, method, path, ctype, body string
		code                            int
		msg                             string
	}{
		{"malformed JSON", "POST", "/api/v1/namespaces/" + ns + "/configmaps", "application/json", `{"apiVersion":"v1","kind":`, 400, "ConfigMap"},
		{"malformed YAML", "POST", "/api/v1/namespaces/" + ns + "/configmaps", "application/yaml", "apiVersion: v1\nkind: [", 400, ""},
		{"garbage protobuf", "POST", "/api/v1/namespaces/" + ns + "/configmaps", "application/vnd.kubernetes.protobuf", "\x00\x01garbage", 400, ""},
		{"wrong kind", "POST", "/api/v1/namespaces/" + ns + "/configmaps", "application/json", `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"x"}}`, 400, "Secret"},
		{"unknown resource", "GET", "/api/v1/namespaces/" + ns + "/frobnicators", "", "", 404, ""},
		{"unsupported field selector", "GET", "/api/v1/namespaces/" + ns + "/configmaps?fieldSelector=spec.nothing%3Dx", "", "", 400, "field label not supported: spec.nothing"},
		{"bad label selector", "GET", "/api/v1/namespaces/" + ns + "/configmaps?labelSelector=a%3D%3D%3D", "", "", 400, ""},
		{"stale resourceVersion", "PUT", "/api/v1/namespaces/" + ns + "/configmaps/keep", "application/json", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"keep","resourceVersion":"1"},"data":{"k":"lost"}}`, 409, "the object has been modified"},
		{"oversized body", "POST", "/api/v1/namespaces/" + ns + "/configmaps", "application/json", huge, 413, ""},
		{"name mismatch", "PUT", "/api/v1/namespaces/" + ns + "/configmaps/keep", "application/json", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"other"}}`, 400, "does not match"},
		{"invalid value", "POST", "/api/v1/namespaces/" + ns + "/services", "application/json", `{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"},"spec":{"ports":[{"port":700000}]}}`, 422, "spec.ports[0].port"},
		{"unknown namespace", "POST", "/api/v1/namespaces/" + nowhere + "/configmaps", "application/json", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}`, 404, nowhere + `\" not found`},
		{"bad patch", "PATCH", "/api/v1/namespaces/" + ns + "/configmaps/keep", "application/json-patch+json", `[{"op":"frob"}]`, 422, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, s.URL+tc.path, bytes.NewBufferString(tc.body))
			if tc.ctype != "" {
				req.Header.Set("Content-Type", tc.ctype)
			}
			code, body := roundTrip(t, hc, req)
			if code != tc.code {
				t.Errorf("%d, want %d: %.300s", code, tc.code, body)
			}
			if !strings.Contains(string(body), `"kind":"Status"`) {
				t.Errorf("no Status in the answer: %.300s", body)
			}
			if !strings.Contains(string(body), tc.msg) {
				t.Errorf("message does not say %q: %.300s", tc.msg, body)
			}
		})
	}
	cm, err := c.CoreV1().ConfigMaps(ns).Get(ctx, "keep", metav1.GetOptions{})
	if err != nil || cm.Data["k"] != "keep" {
		t.Fatalf("stored object harmed: %v %+v", err, cm)
	}
	if _, err := http.Get(s.URL + "/healthz"); err != nil && !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("server down after bad input: %v", err)
	}
}

// TestListPagingAndSelectors lists in pages and by label and field.
func TestListPagingAndSelectors(t *testing.T) {
	s := framework.SharedAPIServer(t)
	c := s.Client()
	ctx := framework.Context(t, time.Minute)
	ns := s.CreateNamespace("paging")
	for i := range 25 {
		labels := map[string]string{"parity": []string{"even", "odd"}[i%2]}
		if _, err := c.CoreV1().ConfigMaps(ns).Create(ctx, configMap(fmt.Sprintf("cm-%02d", i), labels), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	// The test's own (the namespace also holds kube-root-ca.crt).
	opts := metav1.ListOptions{Limit: 10, LabelSelector: "parity"}
	pages := 0
	for {
		l, err := c.CoreV1().ConfigMaps(ns).List(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, cm := range l.Items {
			seen[cm.Name] = true
		}
		if l.Continue == "" {
			break
		}
		opts.Continue = l.Continue
	}
	if pages != 3 || len(seen) != 25 {
		t.Errorf("paging: %d pages, %d objects; want 3, 25", pages, len(seen))
	}
	l, err := c.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: "parity=odd"})
	if err != nil || len(l.Items) != 12 {
		t.Errorf("label selector: %v, %d items, want 12", err, len(l.Items))
	}
	l, err = c.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=cm-07"})
	if err != nil || len(l.Items) != 1 || l.Items[0].Name != "cm-07" {
		t.Errorf("field selector: %v %v", err, l)
	}
	// Pods by node and phase, the selectors node agents and kubectl use,
	// across namespaces as a node agent lists: the node names are the
	// test's own, as other tests' pods share the server.
	n1, n2 := framework.UniqueName("e2e-paging-n1"), framework.UniqueName("e2e-paging-n2")
	for i, node := range []string{n1, n2, n1} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i)},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "svcnet/echo"}}}}
		if _, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pl, err := c.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + n1 + ",status.phase=Pending"})
	if err != nil || len(pl.Items) != 2 {
		t.Errorf("pods on %s: %v, %d, want 2", n1, err, len(pl.Items))
	}
	// A list at a recent resourceVersion is served exactly.
	rv := l.ResourceVersion
	if _, err := c.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchExact}); err != nil {
		t.Errorf("list at exact resourceVersion %s: %v", rv, err)
	}
}

// TestCompactedResourceVersion: once etcd has compacted a revision, lists
// and watches from it answer 410 Gone, and clients relist.
func TestCompactedResourceVersion(t *testing.T) {
	s := framework.StartAPIServer(t, "--etcd-compaction-interval", "1s") // its own: a flag, and a restart
	c := s.Client()
	ctx := framework.Context(t, time.Minute)
	first, err := c.CoreV1().ConfigMaps("default").Create(ctx, configMap("old", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	old := first.ResourceVersion
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 45*time.Second, true, func(ctx context.Context) (bool, error) {
		// Keep writing so that compaction has newer revisions to keep.
		if _, err := c.CoreV1().ConfigMaps("default").Update(ctx, configMap("old", map[string]string{"t": fmt.Sprint(time.Now().UnixNano())}), metav1.UpdateOptions{}); err != nil {
			return false, nil
		}
		_, err := c.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{ResourceVersion: old, ResourceVersionMatch: metav1.ResourceVersionMatchExact})
		return apierrors.IsResourceExpired(err) || apierrors.IsGone(err), nil
	})
	if err != nil {
		t.Fatalf("list at compacted resourceVersion %s never answered 410 Gone", old)
	}
	// The watch cache still holds the history it saw; after a restart it
	// starts at the current revision, and the old one is gone for good.
	s.Restart()
	c = s.Client()
	w, err := c.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{ResourceVersion: old})
	if err == nil {
		// The error may also arrive as the watch's first event.
		ev := <-w.ResultChan()
		w.Stop()
		if st, ok := ev.Object.(*metav1.Status); !ok || st.Code != http.StatusGone {
			t.Errorf("watch from compacted resourceVersion: %v %+v, want 410 Gone", ev.Type, ev.Object)
		}
	} else if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
		t.Errorf("watch from compacted resourceVersion: %v, want 410 Gone", err)
	}
}

// TestEventTTL: an Event expires --event-ttl after its last write (an
// etcd lease), a ConfigMap written with it does not.
func TestEventTTL(t *testing.T) {
	s := framework.StartAPIServer(t, "--event-ttl", "3s") // its own: a flag
	c := s.Client()
	ctx := framework.Context(t, time.Minute)
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "short-lived"}, Reason: "Test", Message: "expires",
		InvolvedObject: corev1.ObjectReference{Kind: "ConfigMap", Namespace: "default", Name: "kept"}}
	if _, err := c.CoreV1().Events("default").Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().ConfigMaps("default").Create(ctx, configMap("kept", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := c.CoreV1().Events("default").Get(ctx, "short-lived", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatal("the Event did not expire within 30 s of a 3 s --event-ttl")
	}
	if took := time.Since(start); took < 2*time.Second {
		t.Errorf("the Event went after %s, before its 3 s TTL", took)
	}
	if _, err := c.CoreV1().ConfigMaps("default").Get(ctx, "kept", metav1.GetOptions{}); err != nil {
		t.Errorf("the ConfigMap beside it: %v", err)
	}
}
