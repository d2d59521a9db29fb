// Package endpoints keeps the legacy core/v1 Endpoints of every Service
// with a selector, as kube-controller-manager's Endpoints controller does.
//lint:file-ignore SA1019 the v1 Endpoints API is deprecated in Kubernetes 1.33 but still served and kept

package endpoints

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/controller/podendpoint"
)

// MaxAddresses is the most addresses one Endpoints object lists; beyond it
// the list is truncated and marked with the over-capacity annotation.
const MaxAddresses = 1000

// OverCapacityAnnotation marks a truncated Endpoints object.
const OverCapacityAnnotation = "endpoints.kubernetes.io/over-capacity"

// Desired computes the Endpoints of svc from the pods its selector matches:
// ready pods in addresses, the others in notReadyAddresses, terminating
// pods left out, one subset per set of resolved ports.
func Desired(svc *corev1.Service, pods []*corev1.Pod) *corev1.Endpoints {
	type subset struct {
		ports          []corev1.EndpointPort
		ready, unready []corev1.EndpointAddress
	}
	subsets := map[string]*subset{}
	family := corev1.IPv4Protocol
	if len(svc.Spec.IPFamilies) > 0 {
		family = svc.Spec.IPFamilies[0]
	}
	total := 0
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil && !svc.Spec.PublishNotReadyAddresses {
			continue
		}
		pe, ok := podendpoint.For(svc, pod, family)
		if !ok || (len(pe.Ports) == 0 && len(svc.Spec.Ports) > 0) {
			continue
		}
		ports := make([]corev1.EndpointPort, 0, len(pe.Ports))
		for _, p := range pe.Ports {
			ports = append(ports, corev1.EndpointPort{Name: p.Name, Port: p.Port, Protocol: p.Protocol, AppProtocol: p.AppProtocol})
		}
		sort.Slice(ports, func(i, j int) bool { return ports[i].Name < ports[j].Name })
		key := portsKey(ports)
		ss := subsets[key]
		if ss == nil {
			ss = &subset{ports: ports}
			subsets[key] = ss
		}
		addr := corev1.EndpointAddress{IP: pe.IP.String(), Hostname: pe.Hostname,
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}}
		if pe.NodeName != "" {
			addr.NodeName = &pe.NodeName
		}
		if pe.Ready {
			ss.ready = append(ss.ready, addr)
		} else {
			ss.unready = append(ss.unready, addr)
		}
		total++
	}
	ep := &corev1.Endpoints{}
	ep.Name, ep.Namespace = svc.Name, svc.Namespace
	ep.Labels = map[string]string{}
	for k, v := range svc.Labels {
		ep.Labels[k] = v
	}
	if svc.Spec.ClusterIP == corev1.ClusterIPNone {
		ep.Labels[corev1.IsHeadlessService] = ""
	}
	keys := make([]string, 0, len(subsets))
	for k := range subsets {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	budget := MaxAddresses
	for _, k := range keys {
		ss := subsets[k]
		byIP := func(a []corev1.EndpointAddress) {
			sort.Slice(a, func(i, j int) bool { return a[i].IP < a[j].IP })
		}
		byIP(ss.ready)
		byIP(ss.unready)
		// Ready addresses are kept first when truncating.
		ss.ready = ss.ready[:min(len(ss.ready), budget)]
		budget -= len(ss.ready)
		ss.unready = ss.unready[:min(len(ss.unready), budget)]
		budget -= len(ss.unready)
		if len(ss.ready)+len(ss.unready) == 0 {
			continue
		}
		ep.Subsets = append(ep.Subsets, corev1.EndpointSubset{Addresses: ss.ready, NotReadyAddresses: ss.unready, Ports: ss.ports})
	}
	if total > MaxAddresses {
		ep.Annotations = map[string]string{OverCapacityAnnotation: "truncated"}
	}
	return ep
}

func portsKey(ports []corev1.EndpointPort) string {
	parts := make([]string, 0, len(ports))
	for _, p := range ports {
		parts = append(parts, fmt.Sprintf("%s/%d/%s", p.Name, p.Port, p.Protocol))
	}
	return strings.Join(parts, ",")
}
