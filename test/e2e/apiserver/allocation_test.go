package apiserver_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/test/e2e/framework"
)

func nodePortService(name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt(8080)}}},
	}
}

// createConcurrently creates n NodePort services at once and returns them.
func createConcurrently(t *testing.T, c kubernetes.Interface, prefix string, n int) []*corev1.Service {
	t.Helper()
	ctx := framework.Context(t, 2*time.Minute)
	out := make([]*corev1.Service, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = c.CoreV1().Services("default").Create(ctx, nodePortService(fmt.Sprintf("%s-%d", prefix, i)), metav1.CreateOptions{})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("create service %d: %v", i, err)
		}
	}
	return out
}

// assertDistinct fails when two services share a cluster IP or node port.
func assertDistinct(t *testing.T, svcs []corev1.Service) {
	t.Helper()
	ips, ports := map[string]string{}, map[int32]string{}
	for _, s := range svcs {
		if s.Spec.ClusterIP != "" && s.Spec.ClusterIP != corev1.ClusterIPNone {
			if other, dup := ips[s.Spec.ClusterIP]; dup {
				t.Errorf("cluster IP %s given to %s and %s", s.Spec.ClusterIP, other, s.Name)
			}
			ips[s.Spec.ClusterIP] = s.Name
		}
		for _, p := range s.Spec.Ports {
			if p.NodePort == 0 {
				continue
			}
			if other, dup := ports[p.NodePort]; dup {
				t.Errorf("node port %d given to %s and %s", p.NodePort, other, s.Name)
			}
			ports[p.NodePort] = s.Name
		}
	}
}

func listServices(t *testing.T, c kubernetes.Interface) []corev1.Service {
	t.Helper()
	l, err := c.CoreV1().Services("").List(framework.Context(t, time.Minute), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

func TestConcurrentAllocationAndRestart(t *testing.T) {
	s := framework.StartAPIServer(t) // its own: it counts all services, and restarts the server
	c := s.Client()
	created := createConcurrently(t, c, "burst", 200)
	for _, svc := range created {
		if svc.Spec.ClusterIP == "" || svc.Spec.Ports[0].NodePort == 0 {
			t.Fatalf("%s: no allocation: %+v", svc.Name, svc.Spec)
		}
	}
	assertDistinct(t, listServices(t, c))

	// After a restart the allocator knows what is taken.
	s.Restart()
	c = s.Client()
	createConcurrently(t, c, "after", 50)
	all := listServices(t, c)
	if len(all) != 251 { // + default/kubernetes
		t.Fatalf("%d services after restart, want 251", len(all))
	}
	assertDistinct(t, all)

	// A requested IP that a service held before the restart is refused.
	taken := nodePortService("taken")
	taken.Spec.ClusterIP = created[0].Spec.ClusterIP
	_, err := c.CoreV1().Services("default").Create(framework.Context(t, time.Minute), taken, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "already allocated") {
		t.Fatalf("reusing %s: %v, want Invalid: already allocated", taken.Spec.ClusterIP, err)
	}
}

func TestAllocationRangesAndRelease(t *testing.T) {
	// 10.0.0.0/29 has 6 usable addresses, one of them for default/kubernetes;
	// the node-port range has 3 ports.
	s := framework.StartAPIServer(t, "--service-cluster-ip-range", "10.0.0.0/29", "--service-node-port-range", "8470-8472")
	c := s.Client()
	ctx := framework.Context(t, time.Minute)
	svcs := c.CoreV1().Services("default")

	for i := range 3 {
		if _, err := svcs.Create(ctx, nodePortService(fmt.Sprintf("np-%d", i)), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create np-%d: %v", i, err)
		}
	}
	_, err := svcs.Create(ctx, nodePortService("np-full"), metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "no ports left in range 8470-8472") {
		t.Fatalf("full node-port range: %v", err)
	}

	// Out-of-range requests are refused with the range in the message.
	bad := nodePortService("bad-port")
	bad.Spec.Ports[0].NodePort = 30000
	_, err = svcs.Create(ctx, bad, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "The range of valid ports is 8470-8472") {
		t.Fatalf("node port out of range: %v", err)
	}
	bad = nodePortService("bad-ip")
	bad.Spec.Type = corev1.ServiceTypeClusterIP
	bad.Spec.ClusterIP = "10.1.0.1"
	_, err = svcs.Create(ctx, bad, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "The range of valid IPs is 10.0.0.0/29") {
		t.Fatalf("cluster IP out of range: %v", err)
	}

	// Changing a NodePort service to ClusterIP releases its node port.
	np0, err := svcs.Get(ctx, "np-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	freed := np0.Spec.Ports[0].NodePort
	np0.Spec.Type = corev1.ServiceTypeClusterIP
	np0.Spec.ExternalTrafficPolicy = ""
	np0, err = svcs.Update(ctx, np0, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("NodePort -> ClusterIP: %v", err)
	}
	if np0.Spec.Ports[0].NodePort != 0 {
		t.Fatalf("node port kept after type change: %d", np0.Spec.Ports[0].NodePort)
	}
	again := nodePortService("np-again")
	again.Spec.Ports[0].NodePort = freed
	if _, err := svcs.Create(ctx, again, metav1.CreateOptions{}); err != nil {
		t.Fatalf("reuse of released node port %d: %v", freed, err)
	}

	// Fill the IP range: 1 (kubernetes) + 4 so far; one address is left.
	cip := nodePortService("cip-1")
	cip.Spec.Type = corev1.ServiceTypeClusterIP
	if _, err := svcs.Create(ctx, cip, metav1.CreateOptions{}); err != nil {
		t.Fatalf("last address: %v", err)
	}
	cip.Name = "cip-2"
	_, err = svcs.Create(ctx, cip, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "no IP addresses left in range 10.0.0.0/29") {
		t.Fatalf("full IP range: %v", err)
	}

	// Deleting releases; ExternalName holds nothing.
	if err := svcs.Delete(ctx, "cip-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := svcs.Create(ctx, cip, metav1.CreateOptions{}); err != nil {
		t.Fatalf("address released by delete not reusable: %v", err)
	}
	ext := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "ext"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "hostnames.example.com"}}
	if ext, err = svcs.Create(ctx, ext, metav1.CreateOptions{}); err != nil || ext.Spec.ClusterIP != "" {
		t.Fatalf("ExternalName: %v %+v", err, ext)
	}
	assertDistinct(t, listServices(t, c))
}

// TestServiceCIDRAndIPAddressAPI: the default ServiceCIDR names the API
// server's range and is Ready; ServiceCIDRs and IPAddresses are stored
// with Kubernetes' validation (canonical names and CIDRs, immutable
// fields).
func TestServiceCIDRAndIPAddressAPI(t *testing.T) {
	s := framework.StartAPIServer(t, "--service-cluster-ip-range", "10.0.0.1/24")
	c := s.Client()
	ctx := framework.Context(t, time.Minute)
	var def *networkingv1.ServiceCIDR
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var err error
		def, err = c.NetworkingV1().ServiceCIDRs().Get(ctx, "kubernetes", metav1.GetOptions{})
		if err == nil && meta.IsStatusConditionTrue(def.Status.Conditions, networkingv1.ServiceCIDRConditionReady) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the default ServiceCIDR, Ready: %v %+v", err, def)
		}
	}
	if fmt.Sprint(def.Spec.CIDRs) != "[10.0.0.0/24]" {
		t.Errorf("default ServiceCIDR %v, want the API server's range, masked", def.Spec.CIDRs)
	}
	for _, tc := range []struct {
		name  string
		cidrs []string
		ok    bool
	}{
		{"dual", []string{"10.100.0.0/16", "fd00:10:96::/112"}, true},
		{"not-canonical", []string{"10.100.0.1/16"}, false},
		{"two-v4", []string{"10.100.0.0/16", "10.101.0.0/16"}, false},
		{"none", nil, false},
	} {
		_, err := c.NetworkingV1().ServiceCIDRs().Create(ctx, &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: tc.name},
			Spec: networkingv1.ServiceCIDRSpec{CIDRs: tc.cidrs}}, metav1.CreateOptions{})
		if (err == nil) != tc.ok || (err != nil && !apierrors.IsInvalid(err)) {
			t.Errorf("ServiceCIDR %s %v: %v, want ok=%v or Invalid", tc.name, tc.cidrs, err, tc.ok)
		}
	}
	dual, _ := c.NetworkingV1().ServiceCIDRs().Get(ctx, "dual", metav1.GetOptions{})
	dual.Spec.CIDRs = []string{"10.200.0.0/16"}
	if _, err := c.NetworkingV1().ServiceCIDRs().Update(ctx, dual, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("changing a ServiceCIDR's range: %v, want Invalid (immutable)", err)
	}

	ref := &networkingv1.ParentReference{Group: "mygroup", Resource: "things", Namespace: "ns", Name: "a"}
	for _, tc := range []struct {
		name string
		ok   bool
	}{{"255.255.255.255", true}, {"fe80::42:1dff:fe84:f9e2", true}, {"10.0.0.01", false}, {"FE80::1", false}, {"not-an-ip", false}} {
		_, err := c.NetworkingV1().IPAddresses().Create(ctx, &networkingv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: tc.name},
			Spec: networkingv1.IPAddressSpec{ParentRef: ref}}, metav1.CreateOptions{})
		if (err == nil) != tc.ok {
			t.Errorf("IPAddress %q: %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
	ip, err := c.NetworkingV1().IPAddresses().Get(ctx, "255.255.255.255", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ip.Spec.ParentRef = &networkingv1.ParentReference{Resource: "other", Name: "b"}
	if _, err := c.NetworkingV1().IPAddresses().Update(ctx, ip, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("changing an IPAddress's parent: %v, want Invalid (immutable)", err)
	}
}
