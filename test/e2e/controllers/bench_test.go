package controllers_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/test/e2e/framework"
)

const (
	benchServices    = 1000
	benchPodsPerSvc  = 10
	benchParallelism = 64
)

// BenchmarkEndpointSliceLatency: with 1,000 Services of 10 ready pods
// each, flip one pod's Ready condition and time until the EndpointSlice
// shows it. Run with
//
//	go test ./test/e2e/controllers -run - -bench EndpointSliceLatency -benchtime 200x
func BenchmarkEndpointSliceLatency(b *testing.B) {
	api := framework.StartAPIServer(b)
	framework.StartControllerManager(b, api, nil)
	client := api.Client()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	populate(b, ctx, client)
	b.Logf("%d services with %d ready pods each in %s", benchServices, benchPodsPerSvc, time.Since(start))

	// Watch pods and slices from here on, in this process, on one clock.
	podSeen := make(chan podEvent, 1024)
	sliceSeen := make(chan sliceEvent, 4096)
	pw, err := client.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		for ev := range pw.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type == watch.Modified {
				podSeen <- podEvent{p.Name, ready(p), time.Now()}
			}
		}
	}()
	sw, err := client.DiscoveryV1().EndpointSlices("default").Watch(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		for ev := range sw.ResultChan() {
			if s, ok := ev.Object.(*discoveryv1.EndpointSlice); ok && ev.Type == watch.Modified {
				sliceSeen <- sliceEvent{s, time.Now()}
			}
		}
	}()
	time.Sleep(time.Second)
	drain(podSeen, sliceSeen)

	var fromEvent, fromWrite []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("pod-%04d-%02d", rand.IntN(benchServices), rand.IntN(benchPodsPerSvc))
		pod, err := client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		want := !ready(pod)
		setReady(pod, want)
		wrote := time.Now()
		if _, err := client.CoreV1().Pods("default").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
		var seenPod time.Time
		timeout := time.After(10 * time.Second)
		for done := false; !done; {
			select {
			case ev := <-podSeen:
				if ev.name == name && ev.ready == want {
					seenPod = ev.at
				}
			case ev := <-sliceSeen:
				if sliceShows(ev.slice, pod.Status.PodIP, want) {
					fromWrite = append(fromWrite, ev.at.Sub(wrote))
					for seenPod.IsZero() {
						ev := <-podSeen
						if ev.name == name && ev.ready == want {
							seenPod = ev.at
						}
					}
					fromEvent = append(fromEvent, ev.at.Sub(seenPod))
					done = true
				}
			case <-timeout:
				b.Fatalf("flip %d of %s: the slice did not follow in 10s", i, name)
			}
		}
	}
	b.StopTimer()
	framework.ReportLatencies(b, "from-pod-event", fromEvent)
	framework.ReportLatencies(b, "from-write", fromWrite)
}

type podEvent struct {
	name  string
	ready bool
	at    time.Time
}

type sliceEvent struct {
	slice *discoveryv1.EndpointSlice
	at    time.Time
}

func drain(a chan podEvent, b chan sliceEvent) {
	for {
		select {
		case <-a:
		case <-b:
		default:
			return
		}
	}
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func setReady(p *corev1.Pod, r bool) {
	st := corev1.ConditionFalse
	if r {
		st = corev1.ConditionTrue
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st, LastTransitionTime: metav1.Now()}}
}

func sliceShows(s *discoveryv1.EndpointSlice, ip string, wantReady bool) bool {
	for _, ep := range s.Endpoints {
		if len(ep.Addresses) > 0 && ep.Addresses[0] == ip {
			return ptr.Deref(ep.Conditions.Ready, false) == wantReady
		}
	}
	return false
}

// populate creates the services and their ready pods, and waits until
// every slice lists them.
func populate(b *testing.B, ctx context.Context, client kubernetes.Interface) {
	work := make(chan int)
	var wg sync.WaitGroup
	for range benchParallelism {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range work {
				app := fmt.Sprintf("app-%04d", s)
				svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("svc-%04d", s)},
					Spec: corev1.ServiceSpec{Selector: map[string]string{"app": app},
						Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt(8080)}}}}
				if _, err := client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
					b.Error(err)
					return
				}
				for p := range benchPodsPerSvc {
					pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%04d-%02d", s, p), Labels: map[string]string{"app": app}},
						Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "c", Image: "svcnet/echo"}}}}
					created, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
					if err != nil {
						b.Error(err)
						return
					}
					created.Status.PodIP = fmt.Sprintf("10.%d.%d.%d", 100+s/250, s%250, p+1)
					setReady(created, true)
					if _, err := client.CoreV1().Pods("default").UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
						b.Error(err)
						return
					}
				}
			}
		}()
	}
	for s := range benchServices {
		work <- s
	}
	close(work)
	wg.Wait()
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		l, err := client.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		readyEndpoints := 0
		for _, s := range l.Items {
			for _, ep := range s.Endpoints {
				if ptr.Deref(ep.Conditions.Ready, false) {
					readyEndpoints++
				}
			}
		}
		if readyEndpoints == benchServices*benchPodsPerSvc {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	b.Fatal("endpoint slices did not list every pod in 3 minutes")
}
