//lint:file-ignore SA1019 the test checks the v1 Endpoints a controller keeps (deprecated in Kubernetes 1.33, still served)

package controllers_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/controllermanager"
	"github.com/svcnet/svcnet/test/e2e/framework"
)

// TestEndpointSlicesFollowPods scales a deployment 3 -> 5 -> 0, flips
// readiness and deletes a pod, and watches the slices and Endpoints follow.
func TestEndpointSlicesFollowPods(t *testing.T) {
	c := startCluster(t)
	ctx := framework.Context(t, 3*time.Minute)
	if _, err := c.client.AppsV1().Deployments("default").Create(ctx, deployment("web", 3), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.client.CoreV1().Services("default").Create(ctx, service("web"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	st := waitSlices(t, c.client, "web", func(s sliceState) bool { return s.ready == 3 })
	if st.ports[9376] != 3 {
		t.Errorf("named target port not resolved: %v", st)
	}
	scale(t, c.client, "web", 5)
	waitSlices(t, c.client, "web", func(s sliceState) bool { return s.ready == 5 && s.total == 5 })

	// Readiness: an unready pod leaves the ready set and comes back.
	pods, err := c.client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil || len(pods.Items) != 5 {
		t.Fatalf("pods: %v %d", err, len(pods.Items))
	}
	victim := pods.Items[0].Name
	if err := c.kubelet.SetReady(ctx, "default", victim, false); err != nil {
		t.Fatal(err)
	}
	waitSlices(t, c.client, "web", func(s sliceState) bool { return s.total == 5 && s.ready == 4 && s.serving == 4 })
	until(t, "Endpoints to list the pod as not ready", 10*time.Second, func(ctx context.Context) (bool, error) {
		ep, err := c.client.CoreV1().Endpoints("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil || len(ep.Subsets) != 1 {
			return false, err
		}
		return len(ep.Subsets[0].Addresses) == 4 && len(ep.Subsets[0].NotReadyAddresses) == 1, nil
	})
	if err := c.kubelet.SetReady(ctx, "default", victim, true); err != nil {
		t.Fatal(err)
	}
	waitSlices(t, c.client, "web", func(s sliceState) bool { return s.ready == 5 })

	// A deleted pod is terminating (not ready, still serving), then gone.
	c.kubelet.HoldDeletions(true)
	if err := c.client.CoreV1().Pods("default").Delete(ctx, victim, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSlices(t, c.client, "web", func(s sliceState) bool { return s.terminating == 1 && s.ready == 5 && s.total == 6 })
	if err := c.kubelet.FinishDeletion(ctx, "default", victim); err != nil {
		t.Fatal(err)
	}
	c.kubelet.HoldDeletions(false)
	waitSlices(t, c.client, "web", func(s sliceState) bool { return s.terminating == 0 && s.total == 5 && s.ready == 5 })

	scale(t, c.client, "web", 0)
	waitSlices(t, c.client, "web", func(s sliceState) bool { return s.total == 0 })
	l, err := c.client.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=web"})
	if err != nil || len(l.Items) != 1 {
		t.Errorf("want one placeholder slice for a service without endpoints: %v %d", err, len(l.Items))
	}
	// Deleting the service takes its slices and Endpoints along.
	if err := c.client.CoreV1().Services("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	until(t, "slices and endpoints of a deleted service to go", 20*time.Second, func(ctx context.Context) (bool, error) {
		l, err := c.client.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=web"})
		_, epErr := c.client.CoreV1().Endpoints("default").Get(ctx, "web", metav1.GetOptions{})
		return err == nil && len(l.Items) == 0 && apierrors.IsNotFound(epErr), nil
	})
}

// TestNamedTargetPortPerPod: pods whose "http" port differs land in
// slices with their own port numbers.
func TestNamedTargetPortPerPod(t *testing.T) {
	c := startCluster(t)
	ctx := framework.Context(t, time.Minute)
	for name, port := range map[string]int32{"a": 8080, "b": 9090} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "mixed"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "svcnet/echo",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: port}}}}}}
		if _, err := c.client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.client.CoreV1().Services("default").Create(ctx, service("mixed"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	st := waitSlices(t, c.client, "mixed", func(s sliceState) bool { return s.ready == 2 })
	if st.ports[8080] != 1 || st.ports[9090] != 1 {
		t.Errorf("per-pod ports: %v", st)
	}
}

// TestSelectorlessServiceMirroring mirrors hand-written Endpoints.
func TestSelectorlessServiceMirroring(t *testing.T) {
	c := startCluster(t)
	ctx := framework.Context(t, time.Minute)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "external-db"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "pg", Port: 5432, TargetPort: intstr.FromInt(5432)}}}}
	if _, err := c.client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "external-db"}, Subsets: []corev1.EndpointSubset{{
		Addresses: []corev1.EndpointAddress{{IP: "192.0.2.10"}, {IP: "192.0.2.11"}},
		Ports:     []corev1.EndpointPort{{Name: "pg", Port: 5432}}}}}
	if _, err := c.client.CoreV1().Endpoints("default").Create(ctx, ep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	st := waitSlices(t, c.client, "external-db", func(s sliceState) bool { return s.ready == 2 })
	if st.ports[5432] != 2 {
		t.Errorf("mirrored ports: %v", st)
	}
	l, _ := c.client.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=external-db"})
	for _, s := range l.Items {
		if s.Labels[discoveryv1.LabelManagedBy] != "endpointslicemirroring-controller.k8s.io" {
			t.Errorf("managed-by %q", s.Labels[discoveryv1.LabelManagedBy])
		}
	}
	// The hand-written Endpoints are left as they are.
	got, _ := c.client.CoreV1().Endpoints("default").Get(ctx, "external-db", metav1.GetOptions{})
	if len(got.Subsets) != 1 || len(got.Subsets[0].Addresses) != 2 {
		t.Errorf("hand-written endpoints changed: %+v", got.Subsets)
	}
}

// TestOrphanEndpoints: Endpoints without a Service stay, updated or not
// (Kubernetes' Endpoint lifecycle conformance test writes such); the
// controller's own Endpoints go with their Service.
func TestOrphanEndpoints(t *testing.T) {
	c := startCluster(t)
	ctx := framework.Context(t, time.Minute)
	eps := c.client.CoreV1().Endpoints("default")
	ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "lonely", Labels: map[string]string{"test": "orphan"}},
		Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "192.0.2.20"}}, Ports: []corev1.EndpointPort{{Port: 80}}}}}
	if _, err := eps.Create(ctx, ep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	patch := []byte(`{"metadata":{"labels":{"patched":"yes"}},"subsets":[{"addresses":[{"ip":"192.0.2.21"}],"ports":[{"port":81}]}]}`)
	if _, err := eps.Patch(ctx, "lonely", types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.client.CoreV1().Services("default").Create(ctx, service("owned"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	until(t, "the controller's Endpoints of owned", 10*time.Second, func(ctx context.Context) (bool, error) {
		_, err := eps.Get(ctx, "owned", metav1.GetOptions{})
		return err == nil, nil
	})
	if err := c.client.CoreV1().Services("default").Delete(ctx, "owned", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	until(t, "owned's Endpoints gone with it", 10*time.Second, func(ctx context.Context) (bool, error) {
		_, err := eps.Get(ctx, "owned", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	got, err := eps.Get(ctx, "lonely", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("hand-written Endpoints without a Service deleted after an update: %v", err)
	}
	if got.Labels["patched"] != "yes" || got.Subsets[0].Addresses[0].IP != "192.0.2.21" {
		t.Errorf("the patch was undone: %+v", got)
	}
}

// TestDeploymentRollout: pod names, a rolling update to a new template,
// status, and events kubectl describe shows.
func TestDeploymentRollout(t *testing.T) {
	c := startCluster(t)
	ctx := framework.Context(t, 2*time.Minute)
	d, err := c.client.AppsV1().Deployments("default").Create(ctx, deployment("roll", 4), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	until(t, "4 available replicas", 30*time.Second, func(ctx context.Context) (bool, error) {
		d, err = c.client.AppsV1().Deployments("default").Get(ctx, "roll", metav1.GetOptions{})
		return err == nil && d.Status.AvailableReplicas == 4 && d.Status.ObservedGeneration == d.Generation, err
	})
	pods, _ := c.client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=roll"})
	for _, p := range pods.Items {
		// roll-<10-char template hash>-<5 random chars>
		parts := strings.Split(p.Name, "-")
		if len(parts) != 3 || len(parts[1]) < 8 || len(parts[2]) != 5 {
			t.Errorf("pod name %q is not <deployment>-<hash>-<random>", p.Name)
		}
		if p.Spec.NodeName == "" {
			t.Errorf("pod %s not scheduled", p.Name)
		}
	}
	firstRS := pods.Items[0].OwnerReferences[0].Name

	patch := []byte(`{"spec":{"template":{"spec":{"containers":[{"name":"c","image":"svcnet/echo"}]}}}}`)
	if _, err := c.client.AppsV1().Deployments("default").Patch(ctx, "roll", types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	until(t, "the rollout to complete", 60*time.Second, func(ctx context.Context) (bool, error) {
		d, err = c.client.AppsV1().Deployments("default").Get(ctx, "roll", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pods, err := c.client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=roll"})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if p.Spec.Containers[0].Image != "svcnet/echo" {
				return false, nil
			}
		}
		// Complete as kubectl rollout status has it: the old replica set's
		// pods counted out of status.replicas too.
		return len(pods.Items) == 4 && d.Status.UpdatedReplicas == 4 && d.Status.AvailableReplicas == 4 &&
			d.Status.Replicas == 4 && d.Status.ObservedGeneration == d.Generation, nil
	})
	rs, err := c.client.AppsV1().ReplicaSets("default").Get(ctx, firstRS, metav1.GetOptions{})
	if err != nil || ptr.Deref(rs.Spec.Replicas, -1) != 0 || rs.Annotations["deployment.kubernetes.io/revision"] != "1" {
		t.Errorf("old replica set after rollout: %v %+v", err, rs)
	}
	var avail, progressing string
	for _, cond := range d.Status.Conditions {
		switch cond.Type {
		case "Available":
			avail = string(cond.Status)
		case "Progressing":
			progressing = cond.Reason
		}
	}
	if avail != "True" || progressing != "NewReplicaSetAvailable" {
		t.Errorf("conditions: available %s progressing %s", avail, progressing)
	}
	k := framework.NewKubectl(t, "1.33", c.api.Kubeconfig)
	out := k.MustRun("", "describe", "deployment", "roll")
	if !strings.Contains(out, "ScalingReplicaSet") || !strings.Contains(out, "Scaled up replica set") {
		t.Errorf("describe shows no events:\n%s", out)
	}
}

// TestScheduler: spreading, nodeSelector, and a pod nothing fits.
func TestScheduler(t *testing.T) {
	c := startCluster(t)
	ctx := framework.Context(t, time.Minute)
	if _, err := c.client.AppsV1().Deployments("default").Create(ctx, deployment("spread", 10), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	until(t, "10 pods scheduled", 30*time.Second, func(ctx context.Context) (bool, error) {
		per, n, err := podsPerNode(ctx, c.client, "app=spread")
		return err == nil && n == 10 && per["node-1"] == 5 && per["node-2"] == 5, err
	})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "picky"},
		Spec: corev1.PodSpec{NodeSelector: map[string]string{"disk": "ssd"}, Containers: []corev1.Container{{Name: "c", Image: "svcnet/echo"}}}}
	if _, err := c.client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	until(t, "picky pod marked unschedulable", 20*time.Second, func(ctx context.Context) (bool, error) {
		p, err := c.client.CoreV1().Pods("default").Get(ctx, "picky", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Reason == corev1.PodReasonUnschedulable &&
				strings.Contains(cond.Message, "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector") {
				return p.Spec.NodeName == "", nil
			}
		}
		return false, nil
	})
	node, err := c.client.CoreV1().Nodes().Get(ctx, "node-2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Labels["disk"] = "ssd"
	if _, err := c.client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	until(t, "picky pod on node-2", 20*time.Second, func(ctx context.Context) (bool, error) {
		p, err := c.client.CoreV1().Pods("default").Get(ctx, "picky", metav1.GetOptions{})
		return err == nil && p.Spec.NodeName == "node-2", err
	})
}

// TestLoadBalancer: addresses from the pool, a requested one, a refused
// one, and release on type change and delete.
func TestLoadBalancer(t *testing.T) {
	c := startCluster(t, func(o *controllermanager.Options) { o.LoadBalancerPool = "172.18.255.200-172.18.255.201" })
	ctx := framework.Context(t, time.Minute)
	svcs := c.client.CoreV1().Services("default")
	lb := func(name, ip string) *corev1.Service {
		s := service(name)
		s.Spec.Type = corev1.ServiceTypeLoadBalancer
		s.Spec.LoadBalancerIP = ip
		return s
	}
	ingressOf := func(name string) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			s, err := svcs.Get(ctx, name, metav1.GetOptions{})
			return err == nil && len(s.Status.LoadBalancer.Ingress) == 1, err
		}
	}
	if _, err := svcs.Create(ctx, lb("want-201", "172.18.255.201"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	until(t, "requested address", 20*time.Second, ingressOf("want-201"))
	if _, err := svcs.Create(ctx, lb("any", ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	until(t, "pool address", 20*time.Second, ingressOf("any"))
	s, _ := svcs.Get(ctx, "any", metav1.GetOptions{})
	if s.Status.LoadBalancer.Ingress[0].IP != "172.18.255.200" || !strings.Contains(strings.Join(s.Finalizers, ","), "load-balancer-cleanup") {
		t.Errorf("any: %+v finalizers %v", s.Status.LoadBalancer, s.Finalizers)
	}
	k := framework.NewKubectl(t, "1.33", c.api.Kubeconfig)
	if out := k.MustRun("", "get", "svc", "any"); !strings.Contains(out, "172.18.255.200") {
		t.Errorf("EXTERNAL-IP column:\n%s", out)
	}
	// The pool is empty now: a third one waits, with an event saying why.
	if _, err := svcs.Create(ctx, lb("third", ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	until(t, "event about the empty pool", 20*time.Second, func(ctx context.Context) (bool, error) {
		evs, err := c.client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=third,reason=SyncLoadBalancerFailed"})
		return err == nil && len(evs.Items) > 0 && strings.Contains(evs.Items[0].Message, "no free address"), err
	})
	// Changing "any" to ClusterIP releases its address, which "third" gets.
	s, _ = svcs.Get(ctx, "any", metav1.GetOptions{})
	s.Spec.Type = corev1.ServiceTypeClusterIP
	s.Spec.ExternalTrafficPolicy = ""
	s.Spec.AllocateLoadBalancerNodePorts = nil
	for i := range s.Spec.Ports {
		s.Spec.Ports[i].NodePort = 0
	}
	if _, err := svcs.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	until(t, "released address reused", 30*time.Second, ingressOf("third"))
	until(t, "status and finalizer of the former load balancer cleared", 20*time.Second, func(ctx context.Context) (bool, error) {
		s, err := svcs.Get(ctx, "any", metav1.GetOptions{})
		return err == nil && len(s.Status.LoadBalancer.Ingress) == 0 && len(s.Finalizers) == 0, err
	})
	// Deleting waits for the release, then the service is gone.
	if err := svcs.Delete(ctx, "want-201", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	until(t, "service deleted after its load balancer", 20*time.Second, func(ctx context.Context) (bool, error) {
		_, err := svcs.Get(ctx, "want-201", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	// A class this controller does not serve is left alone.
	other := lb("other-class", "")
	other.Spec.LoadBalancerClass = ptr.To("example.com/other")
	if _, err := svcs.Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if s, _ := svcs.Get(ctx, "other-class", metav1.GetOptions{}); len(s.Status.LoadBalancer.Ingress) != 0 || len(s.Finalizers) != 0 {
		t.Errorf("foreign class touched: %+v", s)
	}
}

// TestNodeLifecycle silences one node's agent: after the grace period the
// node is Unknown and tainted unreachable, its pods leave the Service's
// ready endpoints, a pod that tolerates that for 2 s is evicted and
// replaced on the other node while those with the default 300 s stay, and
// new pods go to the other node; when the agent speaks again the taints
// go and its pods are ready endpoints again.
func TestNodeLifecycle(t *testing.T) {
	// The hollow kubelet renews Leases every second.
	c := startCluster(t, func(o *controllermanager.Options) {
		o.NodeMonitorGracePeriod, o.NodeMonitorPeriod = 5*time.Second, 200*time.Millisecond
	})
	ctx := framework.Context(t, 2*time.Minute)
	if _, err := c.client.CoreV1().Services("default").Create(ctx, service("life"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.client.AppsV1().Deployments("default").Create(ctx, deployment("life", 4), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSlices(t, c.client, "life", func(s sliceState) bool { return s.total == 4 && s.ready == 4 })
	// quick tolerates an unreachable node for 2 s only; life has the
	// API server's default, 300 s. (Created once life is spread 2 and 2.)
	quick := deployment("quick", 2)
	quick.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists,
		Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](2)}}
	if _, err := c.client.AppsV1().Deployments("default").Create(ctx, quick, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods, err := c.client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=life"})
	if err != nil || len(pods.Items) == 0 {
		t.Fatal(pods, err)
	}
	if !slices.ContainsFunc(pods.Items[0].Spec.Tolerations, func(tol corev1.Toleration) bool {
		return tol.Key == corev1.TaintNodeUnreachable && tol.Effect == corev1.TaintEffectNoExecute && ptr.Deref(tol.TolerationSeconds, 0) == 300
	}) {
		t.Errorf("no default toleration of unreachable nodes: %+v", pods.Items[0].Spec.Tolerations)
	}
	// Longer than the grace period with every agent alive: nothing moves.
	time.Sleep(6 * time.Second)
	if st, err := slicesOf(ctx, c.client, "default", "life"); err != nil || st.ready != 4 {
		t.Fatalf("with every node alive: %v %v", st, err)
	}

	if err := c.kubelet.Silence(ctx, "node-2", true); err != nil {
		t.Fatal(err)
	}
	until(t, "node-2 Unknown and tainted unreachable", 20*time.Second, func(ctx context.Context) (bool, error) {
		n, err := c.client.CoreV1().Nodes().Get(ctx, "node-2", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		var taints []string
		for _, tn := range n.Spec.Taints {
			taints = append(taints, tn.Key+":"+string(tn.Effect))
		}
		slices.Sort(taints)
		return nodeReady(n) == corev1.ConditionUnknown && slices.Equal(taints, []string{
			"node.kubernetes.io/unreachable:NoExecute", "node.kubernetes.io/unreachable:NoSchedule"}), nil
	})
	st := waitSlices(t, c.client, "life", func(s sliceState) bool { return s.total == 4 && s.ready == 2 })
	t.Logf("node-2 silent: %v", st)
	if n, err := c.client.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{}); err != nil || nodeReady(n) != corev1.ConditionTrue || len(n.Spec.Taints) != 0 {
		t.Fatalf("node-1 changed: %v %v", n, err)
	}
	// quick's pod on node-2 is evicted (it stays Terminating: no agent
	// finishes it) and replaced on node-1; life's pods stay.
	until(t, "quick evicted from node-2 and replaced on node-1", 30*time.Second, func(ctx context.Context) (bool, error) {
		pods, err := c.client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=quick"})
		if err != nil {
			return false, err
		}
		live, terminating := map[string]int{}, 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				terminating++
			} else {
				live[p.Spec.NodeName]++
			}
		}
		return terminating == 1 && live["node-1"] == 2 && live["node-2"] == 0, nil
	})
	lifePods, err := c.client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=life"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range lifePods.Items {
		if p.DeletionTimestamp != nil {
			t.Errorf("%s evicted before its 300 s", p.Name)
		}
	}
	scale(t, c.client, "life", 6)
	until(t, "the new pods on node-1", 20*time.Second, func(ctx context.Context) (bool, error) {
		per, n, err := podsPerNode(ctx, c.client, "app=life")
		return err == nil && n == 6 && per["node-1"] == 4 && per["node-2"] == 2, err
	})

	if err := c.kubelet.Silence(ctx, "node-2", false); err != nil {
		t.Fatal(err)
	}
	until(t, "node-2 Ready without taints", 20*time.Second, func(ctx context.Context) (bool, error) {
		n, err := c.client.CoreV1().Nodes().Get(ctx, "node-2", metav1.GetOptions{})
		return err == nil && nodeReady(n) == corev1.ConditionTrue && len(n.Spec.Taints) == 0, err
	})
	waitSlices(t, c.client, "life", func(s sliceState) bool { return s.total == 6 && s.ready == 6 })
	until(t, "the evicted pod gone once node-2's agent is back", 20*time.Second, func(ctx context.Context) (bool, error) {
		pods, err := c.client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=quick"})
		return err == nil && len(pods.Items) == 2, err
	})
}

func nodeReady(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return ""
}

// TestPodGC deletes a Node: its pods are deleted after the quarantine
// and their ReplicaSet replaces them on the node that is left.
func TestPodGC(t *testing.T) {
	c := startCluster(t, func(o *controllermanager.Options) {
		o.OrphanPodQuarantine, o.PodGCPeriod = time.Second, 200*time.Millisecond
	})
	ctx := framework.Context(t, time.Minute)
	if _, err := c.client.AppsV1().Deployments("default").Create(ctx, deployment("orphans", 4), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	perNode := func(ctx context.Context) (map[string]int, error) {
		per, _, err := podsPerNode(ctx, c.client, "app=orphans")
		return per, err
	}
	until(t, "4 pods over both nodes", 30*time.Second, func(ctx context.Context) (bool, error) {
		per, err := perNode(ctx)
		return err == nil && per["node-1"] == 2 && per["node-2"] == 2, err
	})
	if err := c.client.CoreV1().Nodes().Delete(ctx, "node-2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	until(t, "node-2's pods deleted and replaced on node-1", 30*time.Second, func(ctx context.Context) (bool, error) {
		per, err := perNode(ctx)
		return err == nil && per["node-1"] == 4 && per["node-2"] == 0, err
	})
}

// TestReplicationController: a v1 ReplicationController as old manifests
// write it (no selector: the template's labels), kept at its count,
// scaled and exposed with kubectl, refused when invalid, and its pods
// deleted with it.
func TestReplicationController(t *testing.T) {
	c := startCluster(t)
	ctx := framework.Context(t, 2*time.Minute)
	for _, version := range []string{"1.27", "1.33"} {
		t.Run("kubectl "+version, func(t *testing.T) {
			k := framework.NewKubectl(t, version, c.api.Kubeconfig)
			name := "rc-" + strings.ReplaceAll(version, ".", "")
			k.MustRun(fmt.Sprintf(`
apiVersion: v1
kind: ReplicationController
metadata: {name: %s}
spec:
  replicas: 2
  template:
    metadata: {labels: {app: %s}}
    spec:
      containers: [{name: c, image: svcnet/hostnames, ports: [{containerPort: 9376}]}]
`, name, name), "apply", "-f", "-")
			rc, err := c.client.CoreV1().ReplicationControllers("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil || rc.Spec.Selector["app"] != name || rc.Labels["app"] != name {
				t.Fatalf("selector and labels not defaulted from the template: %v %+v", err, rc)
			}
			ready := func(n int32) func(ctx context.Context) (bool, error) {
				return func(ctx context.Context) (bool, error) {
					rc, err := c.client.CoreV1().ReplicationControllers("default").Get(ctx, name, metav1.GetOptions{})
					if err != nil {
						return false, err
					}
					pods, err := c.client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
					return err == nil && len(pods.Items) == int(n) && rc.Status.ReadyReplicas == n && rc.Status.Replicas == n &&
						rc.Status.ObservedGeneration == rc.Generation, err
				}
			}
			until(t, "2 ready replicas", 30*time.Second, ready(2))
			pods, _ := c.client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
			for _, p := range pods.Items {
				if ref := metav1.GetControllerOf(&p); ref == nil || ref.Kind != "ReplicationController" || ref.UID != rc.UID || !strings.HasPrefix(p.Name, name+"-") {
					t.Errorf("pod %s owned by %+v", p.Name, ref)
				}
			}

			k.MustRun("", "scale", "rc", name, "--replicas=3")
			until(t, "3 ready replicas after kubectl scale", 30*time.Second, ready(3))
			if out := k.MustRun("", "get", "rc", name, "--no-headers"); !strings.HasPrefix(strings.Join(strings.Fields(out), " "), name+" 3 3 3 ") {
				t.Errorf("kubectl get rc: %q, want name desired current ready", out)
			}
			k.MustRun("", "expose", "rc", name, "--port=80", "--target-port=9376")
			until(t, "the exposed Service's 3 endpoints", 30*time.Second, func(ctx context.Context) (bool, error) {
				sl, err := c.client.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name})
				n := 0
				if err == nil {
					for _, s := range sl.Items {
						n += len(s.Endpoints)
					}
				}
				return n == 3, err
			})

			// A pod deleted is replaced.
			victim := pods.Items[0].Name
			k.MustRun("", "delete", "pod", victim, "--wait=false")
			until(t, "the deleted pod replaced", 30*time.Second, func(ctx context.Context) (bool, error) {
				ok, err := ready(3)(ctx)
				if !ok {
					return false, err
				}
				_, err = c.client.CoreV1().Pods("default").Get(ctx, victim, metav1.GetOptions{})
				return apierrors.IsNotFound(err), nil
			})

			k.MustRun("", "delete", "rc", name)
			until(t, "the pods deleted with their RC", 30*time.Second, func(ctx context.Context) (bool, error) {
				pods, err := c.client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
				return err == nil && len(pods.Items) == 0, err
			})
		})
	}
	k := framework.NewKubectl(t, "1.33", c.api.Kubeconfig)
	for _, tc := range []struct{ manifest, want string }{
		{`{"apiVersion":"v1","kind":"ReplicationController","metadata":{"name":"bad"},"spec":{"selector":{"app":"x"}}}`, "spec.template: Required value"},
		{`{"apiVersion":"v1","kind":"ReplicationController","metadata":{"name":"bad"},"spec":{"replicas":-1,"template":{"metadata":{"labels":{"app":"x"}},"spec":{"containers":[{"name":"c","image":"svcnet/echo"}]}}}}`, "spec.replicas: Invalid value: -1"},
		{`{"apiVersion":"v1","kind":"ReplicationController","metadata":{"name":"bad"},"spec":{"selector":{"app":"y"},"template":{"metadata":{"labels":{"app":"x"}},"spec":{"containers":[{"name":"c","image":"svcnet/echo"}]}}}}`, "`selector` does not match template `labels`"},
	} {
		if out := k.MustFail(tc.manifest, "create", "-f", "-"); !strings.Contains(out, "is invalid") || !strings.Contains(out, tc.want) {
			t.Errorf("invalid RC: %q, want %q", out, tc.want)
		}
	}
}
