package endpointslice

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

func service(mutate ...func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "hostnames", Namespace: "default", UID: "svc-uid"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "hostnames"}, ClusterIP: "10.96.0.20",
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
			Ports:      []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt(9376)}}},
	}
	for _, m := range mutate {
		m(s)
	}
	return s
}

func pod(i int, mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("hostnames-%03d", i), Namespace: "default", UID: types.UID(fmt.Sprintf("uid-%d", i)),
			Labels: map[string]string{"app": "hostnames"}},
		Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "c",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 9376, Protocol: corev1.ProtocolTCP}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: fmt.Sprintf("10.244.%d.%d", i/250, i%250+2),
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func pods(n int) []*corev1.Pod {
	out := make([]*corev1.Pod, n)
	for i := range out {
		out[i] = pod(i)
	}
	return out
}

func unready(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse }
func terminating(p *corev1.Pod) {
	now := metav1.Now()
	p.DeletionTimestamp = &now
}

// apply gives created slices names, as the API server would, and returns
// the slices after the plan.
func apply(existing []*discoveryv1.EndpointSlice, p Plan) []*discoveryv1.EndpointSlice {
	byName := map[string]*discoveryv1.EndpointSlice{}
	for _, s := range existing {
		byName[s.Name] = s
	}
	for _, s := range p.Delete {
		delete(byName, s.Name)
	}
	for _, s := range p.Update {
		byName[s.Name] = s
	}
	for i, s := range p.Create {
		s = s.DeepCopy()
		s.Name = fmt.Sprintf("%s%d-%d", s.GenerateName, len(byName), i)
		byName[s.Name] = s
	}
	out := make([]*discoveryv1.EndpointSlice, 0, len(byName))
	for _, s := range byName {
		out = append(out, s)
	}
	return out
}

func count(slices []*discoveryv1.EndpointSlice) (endpoints, ready int) {
	for _, s := range slices {
		for _, ep := range s.Endpoints {
			endpoints++
			if *ep.Conditions.Ready {
				ready++
			}
		}
	}
	return
}

func TestReconcile(t *testing.T) {
	cases := []struct {
		name                   string
		svc                    *corev1.Service
		before, after          []*corev1.Pod
		creates, updates, dels int // of the second reconcile (after)
		slices, endpoints      int
		ready                  int
	}{
		{"steady state writes nothing", service(), pods(3), pods(3), 0, 0, 0, 1, 3, 3},
		{"one pod unready: one update", service(), pods(3), []*corev1.Pod{pod(0), pod(1, unready), pod(2)}, 0, 1, 0, 1, 3, 2},
		{"terminating pod stays, not ready", service(), pods(3), []*corev1.Pod{pod(0), pod(1, terminating), pod(2)}, 0, 1, 0, 1, 3, 2},
		{"scale 3 to 5", service(), pods(3), pods(5), 0, 1, 0, 1, 5, 5},
		{"scale to 0 keeps a placeholder", service(), pods(3), nil, 0, 1, 0, 1, 0, 0},
		{"250 pods in slices of 100", service(), nil, pods(250), 2, 1, 0, 3, 250, 250},
		{"one pod of 250 leaves: one slice updated", service(), pods(250), pods(249), 0, 1, 0, 3, 249, 249},
		{"publishNotReadyAddresses lists unready as ready", service(func(s *corev1.Service) { s.Spec.PublishNotReadyAddresses = true }),
			nil, []*corev1.Pod{pod(0, unready)}, 0, 1, 0, 1, 1, 1},
		{"pod without IP left out", service(), nil, []*corev1.Pod{pod(0, func(p *corev1.Pod) { p.Status.PodIP = "" })}, 0, 0, 0, 1, 0, 0},
		{"finished pod left out", service(), nil, []*corev1.Pod{pod(0, func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded })}, 0, 0, 0, 1, 0, 0},
		{"named port resolving differently splits slices", service(func(s *corev1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromString("http") }),
			nil, []*corev1.Pod{pod(0), pod(1, func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].ContainerPort = 8080 })}, 1, 1, 0, 2, 2, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			first := Reconcile(Input{Service: c.svc, Pods: c.before, MaxPerSlice: 100})
			existing := apply(nil, first)
			second := Reconcile(Input{Service: c.svc, Pods: c.after, Existing: existing, MaxPerSlice: 100})
			if len(second.Create) != c.creates || len(second.Update) != c.updates || len(second.Delete) != c.dels {
				t.Errorf("plan: %d creates %d updates %d deletes; want %d %d %d",
					len(second.Create), len(second.Update), len(second.Delete), c.creates, c.updates, c.dels)
			}
			final := apply(existing, second)
			eps, ready := count(final)
			if len(final) != c.slices || eps != c.endpoints || ready != c.ready {
				t.Errorf("result: %d slices %d endpoints %d ready; want %d %d %d", len(final), eps, ready, c.slices, c.endpoints, c.ready)
			}
			for _, s := range final {
				if len(s.Endpoints) > 100 {
					t.Errorf("slice with %d endpoints", len(s.Endpoints))
				}
				if s.Labels[discoveryv1.LabelServiceName] != "hostnames" || s.Labels[discoveryv1.LabelManagedBy] != ManagedBy {
					t.Errorf("labels %v", s.Labels)
				}
				if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != "svc-uid" || !*s.OwnerReferences[0].Controller {
					t.Errorf("owner %v", s.OwnerReferences)
				}
			}
			// A second pass over the result changes nothing.
			if again := Reconcile(Input{Service: c.svc, Pods: c.after, Existing: final, MaxPerSlice: 100}); !again.Empty() {
				t.Errorf("not stable: %d %d %d", len(again.Create), len(again.Update), len(again.Delete))
			}
		})
	}
}

func TestEndpointFields(t *testing.T) {
	svc := service(func(s *corev1.Service) { s.Spec.ClusterIP = corev1.ClusterIPNone })
	p := pod(0, func(p *corev1.Pod) { p.Spec.Hostname, p.Spec.Subdomain = "web-0", "hostnames" }, terminating)
	plan := Reconcile(Input{Service: svc, Pods: []*corev1.Pod{p}, Zone: func(string) string { return "zone-a" },
		TriggerTime: time.Unix(1700000000, 0)})
	if len(plan.Create) != 1 {
		t.Fatalf("plan %+v", plan)
	}
	s := plan.Create[0]
	ep := s.Endpoints[0]
	if *ep.Conditions.Ready || !*ep.Conditions.Serving || !*ep.Conditions.Terminating {
		t.Errorf("conditions %+v", ep.Conditions)
	}
	if ptr.Deref(ep.Hostname, "") != "web-0" || ptr.Deref(ep.NodeName, "") != "node-1" || ptr.Deref(ep.Zone, "") != "zone-a" {
		t.Errorf("endpoint %+v", ep)
	}
	if ep.TargetRef == nil || ep.TargetRef.Name != p.Name || ep.TargetRef.UID != p.UID {
		t.Errorf("targetRef %+v", ep.TargetRef)
	}
	if *s.Ports[0].Port != 9376 || *s.Ports[0].Name != "http" {
		t.Errorf("ports %+v", s.Ports)
	}
	if _, ok := s.Labels[corev1.IsHeadlessService]; !ok {
		t.Errorf("headless label missing: %v", s.Labels)
	}
	if s.Annotations[TriggerTimeAnnotation] != "2023-11-14T22:13:20Z" {
		t.Errorf("trigger time %q", s.Annotations[TriggerTimeAnnotation])
	}
}
