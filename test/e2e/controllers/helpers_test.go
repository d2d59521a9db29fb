package controllers_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/controllermanager"
	"github.com/svcnet/svcnet/test/e2e/framework"
)

// cluster is an API server, a controller manager and a hollow kubelet
// with two nodes.
type cluster struct {
	api     *framework.APIServer
	cm      *framework.Process
	client  kubernetes.Interface
	kubelet *framework.HollowKubelet
}

func startCluster(t *testing.T, edit ...func(*controllermanager.Options)) *cluster {
	t.Helper()
	api := framework.StartAPIServer(t)
	c := &cluster{api: api, client: api.Client()}
	c.cm = framework.StartControllerManager(t, api, func(o *controllermanager.Options) {
		for _, e := range edit {
			e(o)
		}
	})
	c.kubelet = framework.StartHollowKubelet(t, c.client, "node-1", "node-2")
	return c
}

func until(t *testing.T, what string, timeout time.Duration, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout+5*time.Second)
	defer cancel()
	var last error
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		last = err
		return ok, nil
	})
	if err != nil {
		t.Fatalf("timed out after %s waiting for %s (last error: %v)", timeout, what, last)
	}
}

func deployment(name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "svcnet/hostnames",
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 9376}}}}},
			},
		},
	}
}

func service(name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}}},
	}
}

// sliceState sums up the endpoints of a service's slices.
type sliceState struct {
	total, ready, serving, terminating int
	ports                              map[int32]int // resolved port -> endpoints
}

func (s sliceState) String() string {
	return fmt.Sprintf("%d endpoints (%d ready, %d serving, %d terminating) ports %v", s.total, s.ready, s.serving, s.terminating, s.ports)
}

func slicesOf(ctx context.Context, c kubernetes.Interface, ns, svc string) (sliceState, error) {
	l, err := c.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
	if err != nil {
		return sliceState{}, err
	}
	st := sliceState{ports: map[int32]int{}}
	for _, s := range l.Items {
		for _, ep := range s.Endpoints {
			st.total++
			if ptr.Deref(ep.Conditions.Ready, false) {
				st.ready++
			}
			if ptr.Deref(ep.Conditions.Serving, false) {
				st.serving++
			}
			if ptr.Deref(ep.Conditions.Terminating, false) {
				st.terminating++
			}
			for _, p := range s.Ports {
				st.ports[ptr.Deref(p.Port, 0)]++
			}
		}
	}
	return st, nil
}

func waitSlices(t *testing.T, c kubernetes.Interface, svc string, want func(sliceState) bool) sliceState {
	t.Helper()
	var st sliceState
	until(t, "endpoint slices of "+svc, 30*time.Second, func(ctx context.Context) (bool, error) {
		var err error
		st, err = slicesOf(ctx, c, "default", svc)
		if err == nil && !want(st) {
			err = fmt.Errorf("last seen: %v", st)
		}
		return err == nil, err
	})
	return st
}

// podsPerNode counts the pods of the default namespace that selector
// picks, by node (the unscheduled under ""), and in all.
func podsPerNode(ctx context.Context, c kubernetes.Interface, selector string) (map[string]int, int, error) {
	pods, err := c.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, 0, err
	}
	per := map[string]int{}
	for _, p := range pods.Items {
		per[p.Spec.NodeName]++
	}
	return per, len(pods.Items), nil
}

// scale sets a deployment's replicas through its scale subresource. The
// controller writes the deployment's status meanwhile: a stale
// resourceVersion is a conflict, retried as clients do.
func scale(t *testing.T, c kubernetes.Interface, name string, n int32) {
	t.Helper()
	ctx := framework.Context(t, 30*time.Second)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := c.AppsV1().Deployments("default").GetScale(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Spec.Replicas = n
		_, err = c.AppsV1().Deployments("default").UpdateScale(ctx, name, s, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
