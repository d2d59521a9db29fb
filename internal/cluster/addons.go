package cluster

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/deploy"
	"github.com/svcnet/svcnet/internal/pki"
)

// DNSName is the cluster DNS's Service and the label its pods carry,
// with Kubernetes' names.
const DNSName = "kube-dns"

// DNSDeployment is the cluster DNS's Deployment (deploy/dns.yaml's).
const DNSDeployment = "svcnet-dns"

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

// installAddons runs the cluster DNS behind kube-system/kube-dns (a
// Service at the tenth address of the service range, as kubeadm makes it
// for CoreDNS) and the ingress controller, from deploy/'s dns.yaml and
// ingress.yaml as a user applies them; with the ingress controller, the
// Gateway API's CRDs and the GatewayClass svcnet, installed meanwhile
// (the API server takes seconds to establish CRDs of that size, and the
// ingress controller serves them once they are). Both reach the API
// through the kubernetes Service: without a proxy (--proxy-mode none)
// they are installed and not waited for.
func installAddons(ctx context.Context, c kubernetes.Interface, s *supervisor) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: DNSName, Namespace: "kube-system",
			Labels: map[string]string{"k8s-app": DNSName, "kubernetes.io/name": "svcnet-dns", "kubernetes.io/cluster-service": "true"}},
		Spec: corev1.ServiceSpec{ClusterIP: s.dnsIP().String(), Selector: map[string]string{"k8s-app": DNSName}, Ports: []corev1.ServicePort{
			{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt(53)},
			{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt(53)},
			{Name: "metrics", Port: 9153, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt(9153)},
		}},
	}
	if _, err := c.CoreV1().Services("kube-system").Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kube-dns service: %w", err)
	}
	v := deploy.Defaults()
	// The cluster has no route out: without an upstream the DNS is told
	// to forward nothing (never the machine's resolver).
	v.DNSUpstream = cmp.Or(s.opts.DNSUpstream, "none")
	v.ClusterCIDR, v.ServiceCIDR = s.plan.ClusterCIDR.String(), s.plan.ServiceCIDR.String()
	components := []string{"dns"}
	gatewayDone := make(chan error, 1)
	if s.opts.NoIngress {
		gatewayDone <- nil
	} else {
		components = append(components, "ingress")
		cfg, _, err := s.state.client()
		if err != nil {
			return err
		}
		ext, gw, err := gatewayClients(cfg)
		if err != nil {
			return err
		}
		go func() { gatewayDone <- installGatewayAPI(ctx, ext, gw, s.opts.stepWait()) }()
	}
	err := installComponents(ctx, c, s, v, components)
	if gwErr := <-gatewayDone; err == nil {
		err = gwErr
	}
	return err
}

// installComponents creates deploy/'s components and waits for the DNS
// and ingress controller Deployments, as installAddons says.
func installComponents(ctx context.Context, c kubernetes.Interface, s *supervisor, v deploy.Values, components []string) error {
	for _, name := range components {
		comp, err := deploy.Lookup(name)
		if err != nil {
			return err
		}
		objs, err := comp.Objects(v.Map())
		if err != nil {
			return err
		}
		if err := deploy.Create(ctx, c, objs); err != nil {
			return fmt.Errorf("%s add-on: %w", name, err)
		}
	}
	if s.opts.ProxyMode == ProxyModeNone {
		return nil
	}
	// Both start together; the DNS first in the message when both fail.
	if err := waitDeployment(ctx, c, "kube-system", DNSDeployment, s.opts.stepWait()); err != nil {
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
	ingressLabel     = "app.kubernetes.io/name"
)
