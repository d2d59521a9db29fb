package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	ingresscontroller "github.com/svcnet/svcnet/internal/ingress/controller"
	"github.com/svcnet/svcnet/internal/ingress/route"
	"github.com/svcnet/svcnet/internal/pki"
)

// DNSName is the cluster DNS's Deployment and the label its pods carry,
// with Kubernetes' names.
const DNSName = "kube-dns"

// DNSUser is the cluster DNS's user, which owns its kubeconfig; below
// the range of the users pods get by default.
const DNSUser = 10053

func (s *supervisor) waitAPI(ctx context.Context, ca *pki.CA, port int) error {
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, s.opts.stepWait(), true, func(context.Context) (bool, error) {
		resp, err := hc.Get(fmt.Sprintf("https://127.0.0.1:%d/readyz", port))
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("API server not ready in %s; see %s", s.opts.stepWait(), s.state.Log("apiserver"))
	}
	return nil
}

func (s *supervisor) client() (kubernetes.Interface, error) {
	_, client, err := s.state.client()
	return client, err
}

func waitNodes(ctx context.Context, c kubernetes.Interface, n int, timeout time.Duration) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		ready := 0
		for _, node := range nodes.Items {
			for _, cond := range node.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		return ready >= n, nil
	})
	if err != nil {
		return fmt.Errorf("nodes not ready in %s; see the node logs in %s", timeout, StateOf("").Dir)
	}
	return nil
}

// installAddons runs the cluster DNS as kube-system/kube-dns: a Service at
// the tenth address of the service range and a Deployment of svcnet/dns
// pods, as kubeadm installs CoreDNS.
func installAddons(ctx context.Context, c kubernetes.Interface, s *supervisor) error {
	labels := map[string]string{"k8s-app": DNSName}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: DNSName, Namespace: "kube-system",
			Labels: map[string]string{"k8s-app": DNSName, "kubernetes.io/name": "svcnet-dns", "kubernetes.io/cluster-service": "true"}},
		Spec: corev1.ServiceSpec{ClusterIP: s.dnsIP().String(), Selector: labels, Ports: []corev1.ServicePort{
			{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt(53)},
			{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt(53)},
			{Name: "metrics", Port: 9153, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt(9153)},
		}},
	}
	if _, err := c.CoreV1().Services("kube-system").Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kube-dns service: %w", err)
	}
	args := []string{"--kubeconfig", addonKubeconfigMount, "--listen", "0.0.0.0:53",
		"--metrics-bind-address", "0.0.0.0:9153", "--health-bind-address", "0.0.0.0:8080",
		"--service-cidr", s.plan.ServiceCIDR.String(), "--pod-cidr", s.plan.ClusterCIDR.String(), "--pods", "insecure"}
	// The cluster has no route out: without an upstream the DNS is told to
	// forward nothing (never the machine's resolver).
	upstream := "none"
	if s.opts.DNSUpstream != "" {
		upstream = s.opts.DNSUpstream
	}
	args = append(args, "--upstream", upstream)
	dep := addon{
		namespace: "kube-system", name: DNSName, labels: labels, container: "dns", image: "svcnet/dns", args: args,
		kubeconfig: s.state.InCluster("dns"), user: DNSUser, healthPort: 8080,
		dnsPolicy: corev1.DNSDefault, // the DNS must not ask itself
		ports: []corev1.ContainerPort{
			{Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP},
			{Name: "dns-tcp", ContainerPort: 53, Protocol: corev1.ProtocolTCP},
			{Name: "metrics", ContainerPort: 9153, Protocol: corev1.ProtocolTCP},
		},
	}.deployment()
	if _, err := c.AppsV1().Deployments("kube-system").Create(ctx, dep, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kube-dns deployment: %w", err)
	}
	if !s.opts.NoIngress {
		if err := installIngress(ctx, c, s); err != nil {
			return err
		}
	}
	// Both start together; the DNS first in the message when both fail.
	if err := waitDeployment(ctx, c, "kube-system", DNSName, s.opts.stepWait()); err != nil {
		return fmt.Errorf("cluster DNS not ready in %s: kubectl -n kube-system describe pods -l k8s-app=%s", s.opts.stepWait(), DNSName)
	}
	if s.opts.NoIngress {
		return nil
	}
	if err := waitDeployment(ctx, c, IngressNamespace, IngressName, s.opts.stepWait()); err != nil {
		return fmt.Errorf("ingress controller not ready in %s: kubectl -n %s describe pods -l %s=%s", s.opts.stepWait(), IngressNamespace, ingressLabel, IngressName)
	}
	return nil
}

func waitDeployment(ctx context.Context, c kubernetes.Interface, ns, name string, timeout time.Duration) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		d, err := c.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && d.Status.ReadyReplicas >= 1, nil
	})
}

// The ingress add-on, with ingress-nginx's layout: a namespace of its
// own, a Deployment behind a LoadBalancer Service, and the default
// IngressClass.
const (
	IngressNamespace = "ingress-svcnet"
	IngressName      = "ingress-controller"
	IngressClassName = "svcnet"
	// IngressUser owns the controller's kubeconfig; it binds 80 and 443
	// with NET_BIND_SERVICE only.
	IngressUser  = 10080
	ingressLabel = "app.kubernetes.io/name"
)

// installIngress creates the ingress add-on; it does not wait.
func installIngress(ctx context.Context, c kubernetes.Interface, s *supervisor) error {
	create := func(what string, err error) error {
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("ingress add-on, %s: %w", what, err)
		}
		return nil
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: IngressNamespace}}
	if _, err := c.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); create("namespace", err) != nil {
		return create("namespace", err)
	}
	class := &networkingv1.IngressClass{
		ObjectMeta: metav1.ObjectMeta{Name: IngressClassName, Annotations: map[string]string{route.DefaultClassAnnotation: "true"}},
		Spec:       networkingv1.IngressClassSpec{Controller: ingresscontroller.DefaultController},
	}
	if _, err := c.NetworkingV1().IngressClasses().Create(ctx, class, metav1.CreateOptions{}); create("IngressClass", err) != nil {
		return create("IngressClass", err)
	}
	labels := map[string]string{ingressLabel: IngressName}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: IngressName, Namespace: IngressNamespace, Labels: labels},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: labels, Ports: []corev1.ServicePort{
			{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("http")},
			{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("https")},
		}},
	}
	if _, err := c.CoreV1().Services(IngressNamespace).Create(ctx, svc, metav1.CreateOptions{}); create("Service", err) != nil {
		return create("Service", err)
	}
	dep := addon{
		namespace: IngressNamespace, name: IngressName, labels: labels, container: "controller", image: "svcnet/ingress",
		args: []string{"--kubeconfig", addonKubeconfigMount, "--http-address", "0.0.0.0:80", "--https-address", "0.0.0.0:443",
			"--metrics-address", "0.0.0.0:10254", "--publish-service", IngressNamespace + "/" + IngressName},
		kubeconfig: s.state.InCluster("ingress"), user: IngressUser, healthPort: 10254,
		ports: []corev1.ContainerPort{
			{Name: "http", ContainerPort: 80, Protocol: corev1.ProtocolTCP},
			{Name: "https", ContainerPort: 443, Protocol: corev1.ProtocolTCP},
			{Name: "metrics", ContainerPort: 10254, Protocol: corev1.ProtocolTCP},
		},
	}.deployment()
	_, err := c.AppsV1().Deployments(IngressNamespace).Create(ctx, dep, metav1.CreateOptions{})
	return create("Deployment", err)
}

// addonKubeconfigMount is where add-on pods see their kubeconfig.
const addonKubeconfigMount = "/run/svcnet/kubeconfig"

// addon is a cluster add-on: two replicas of a svcnet image talking to
// the API with credentials of their own, mounted read-only from a file of
// its user's, running as that user with, of all capabilities, only the
// one to bind ports below 1024 (as CoreDNS's manifest), probed on
// /readyz and /healthz.
type addon struct {
	namespace, name  string
	labels           map[string]string
	container, image string
	args             []string
	ports            []corev1.ContainerPort
	kubeconfig       string // on the host, owned by user
	user             int64
	healthPort       int
	dnsPolicy        corev1.DNSPolicy
}

func (a addon) deployment() *appsv1.Deployment {
	probe := func(path string) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt(a.healthPort)}},
			PeriodSeconds: 2, TimeoutSeconds: 1, FailureThreshold: 3}
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: a.name, Namespace: a.namespace, Labels: a.labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: a.labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: a.labels},
				Spec: corev1.PodSpec{
					DNSPolicy: a.dnsPolicy,
					Volumes: []corev1.Volume{{Name: "kubeconfig", VolumeSource: corev1.VolumeSource{
						HostPath: &corev1.HostPathVolumeSource{Path: a.kubeconfig, Type: ptr.To(corev1.HostPathFile)}}}},
					Containers: []corev1.Container{{
						Name: a.container, Image: a.image, Args: a.args,
						VolumeMounts: []corev1.VolumeMount{{Name: "kubeconfig", MountPath: addonKubeconfigMount, ReadOnly: true}},
						SecurityContext: &corev1.SecurityContext{
							RunAsUser: ptr.To(a.user), RunAsGroup: ptr.To(a.user),
							AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
							Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_BIND_SERVICE"}, Drop: []corev1.Capability{"ALL"}},
						},
						Ports:          a.ports,
						ReadinessProbe: probe("/readyz"),
						LivenessProbe:  probe("/healthz"),
					}},
				},
			},
		},
	}
}
