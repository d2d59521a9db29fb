// Package podendpoint decides what a pod contributes to the endpoints of a
// Service: whether it is listed, its conditions, and its ports with named
// target ports resolved against the pod's own containers. The Endpoints
// and EndpointSlice controllers share it, so both always agree.
package podendpoint

import (
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/svcnet/svcnet/internal/controller"
)

// Port is a service port as served by one pod.
type Port struct {
	Name        string
	Port        int32
	Protocol    corev1.Protocol
	AppProtocol *string
}

// Endpoint is what one pod contributes to one service.
type Endpoint struct {
	Pod         *corev1.Pod
	IP          netip.Addr
	Ready       bool // receives new traffic
	Serving     bool // its readiness, also while terminating
	Terminating bool
	Hostname    string
	NodeName    string
	Ports       []Port
}

// Include reports whether pod can be an endpoint at all: it has an
// address and has not finished. Terminating pods are included (with the
// terminating condition) so that proxies can fall back to them.
func Include(pod *corev1.Pod) bool {
	if pod.Status.PodIP == "" && len(pod.Status.PodIPs) == 0 {
		return false
	}
	return pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}

// For returns the endpoint pod gives svc in the given family, or false
// when it gives none.
func For(svc *corev1.Service, pod *corev1.Pod, family corev1.IPFamily) (Endpoint, bool) {
	if !Include(pod) {
		return Endpoint{}, false
	}
	ip, ok := podIP(pod, family)
	if !ok {
		return Endpoint{}, false
	}
	ready := controller.PodReady(pod)
	terminating := pod.DeletionTimestamp != nil
	ep := Endpoint{
		Pod:         pod,
		IP:          ip,
		Serving:     ready || svc.Spec.PublishNotReadyAddresses,
		Terminating: terminating,
		NodeName:    pod.Spec.NodeName,
	}
	// publishNotReadyAddresses lists every pod as ready, even a terminating one.
	ep.Ready = svc.Spec.PublishNotReadyAddresses || (ready && !terminating)
	if pod.Spec.Hostname != "" && pod.Spec.Subdomain == svc.Name && svc.Namespace == pod.Namespace {
		ep.Hostname = pod.Spec.Hostname
	}
	for _, sp := range svc.Spec.Ports {
		port, err := FindPort(pod, &sp)
		if err != nil {
			continue // this pod does not serve that port
		}
		ep.Ports = append(ep.Ports, Port{Name: sp.Name, Port: port, Protocol: sp.Protocol, AppProtocol: sp.AppProtocol})
	}
	return ep, true
}

func podIP(pod *corev1.Pod, family corev1.IPFamily) (netip.Addr, bool) {
	ips := pod.Status.PodIPs
	if len(ips) == 0 {
		ips = []corev1.PodIP{{IP: pod.Status.PodIP}}
	}
	for _, p := range ips {
		a, err := netip.ParseAddr(p.IP)
		if err != nil {
			continue
		}
		if (family == corev1.IPv6Protocol) == (a.Is6() && !a.Is4In6()) {
			return a.Unmap(), true
		}
	}
	return netip.Addr{}, false
}

// FindPort resolves a service port's target port on pod: a number as is, a
// name against the pod's container ports of the same protocol.
func FindPort(pod *corev1.Pod, sp *corev1.ServicePort) (int32, error) {
	switch sp.TargetPort.Type {
	case intstr.String:
		name := sp.TargetPort.StrVal
		// Of init containers, only sidecars (restartPolicy: Always) serve,
		// as in Kubernetes.
		serving := slices.Clone(pod.Spec.Containers)
		for _, c := range pod.Spec.InitContainers {
			if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
				serving = append(serving, c)
			}
		}
		for _, c := range serving {
			for _, p := range c.Ports {
				proto := p.Protocol
				if proto == "" {
					proto = corev1.ProtocolTCP
				}
				if p.Name == name && proto == sp.Protocol {
					return p.ContainerPort, nil
				}
			}
		}
		return 0, fmt.Errorf("no container port named %q (%s) in pod %s/%s", name, sp.Protocol, pod.Namespace, pod.Name)
	case intstr.Int:
		if sp.TargetPort.IntVal == 0 {
			return sp.Port, nil
		}
		return sp.TargetPort.IntVal, nil
	}
	return 0, fmt.Errorf("no port")
}
