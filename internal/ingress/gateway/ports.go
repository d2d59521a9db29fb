package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A Gateway is served by the ingress controller's pods, each Gateway on
// proxy ports of its own (a listener's port is the Gateway's Service's
// port; its target port the proxy's), so that a request's Gateway is
// known from the port it came to. The Service lives in the controller's
// namespace, as Envoy Gateway's do, and selects the controller's pods.

// Labels of a Gateway's Service.
const (
	LabelGatewayName      = "gateway.networking.k8s.io/gateway-name"
	LabelGatewayNamespace = "svcnet.dev/gateway-namespace"
)

// FirstPort and LastPort bound the proxy ports given to Gateways'
// listeners: above the well-known ports, below the kernel's ephemeral
// range, in the pods' own network namespaces.
const (
	FirstPort = 20000
	LastPort  = 29999
)

// ServiceName is the name of a Gateway's Service: gw-<namespace>-<name>,
// cut to fit, and a hash of both so that cut names stay apart.
func ServiceName(gw types.NamespacedName) string {
	sum := sha256.Sum256([]byte(gw.Namespace + "/" + gw.Name))
	base := "gw-" + gw.Namespace + "-" + gw.Name
	if len(base) > 50 {
		base = base[:50]
	}
	return base + "-" + hex.EncodeToString(sum[:4])
}

// Of is the Gateway a Service was made for, from its labels.
func Of(svc *corev1.Service) (types.NamespacedName, bool) {
	name, ns := svc.Labels[LabelGatewayName], svc.Labels[LabelGatewayNamespace]
	return types.NamespacedName{Namespace: ns, Name: name}, name != "" && ns != ""
}

// InfraOf reads what a Gateway's Service tells the routing.
func InfraOf(svc *corev1.Service) Infra {
	in := Infra{Ports: map[int32]int32{}}
	for _, p := range svc.Spec.Ports {
		if p.TargetPort.IntVal != 0 {
			in.Ports[p.Port] = p.TargetPort.IntVal
		}
	}
	for _, a := range svc.Status.LoadBalancer.Ingress {
		if a.IP != "" {
			in.Addresses = append(in.Addresses, a.IP)
		}
	}
	return in
}

// Want is the listener ports a Gateway needs, for AssignPorts.
type Want struct {
	Gateway types.NamespacedName
	Ports   []int32
}

// AssignPorts gives each listener port of each Gateway (oldest first) a
// proxy port: the one its Service has, unless an older Gateway's already
// holds it (two replicas that made Services at once), else the lowest
// free one. Every replica computes the same from the same Services.
func AssignPorts(want []Want, have map[types.NamespacedName]Infra) map[types.NamespacedName]map[int32]int32 {
	out := map[types.NamespacedName]map[int32]int32{}
	taken := map[int32]bool{}
	for _, w := range want {
		out[w.Gateway] = map[int32]int32{}
		for _, p := range w.Ports {
			if pp, ok := have[w.Gateway].Ports[p]; ok && pp >= FirstPort && pp <= LastPort && !taken[pp] {
				out[w.Gateway][p], taken[pp] = pp, true
			}
		}
	}
	next := int32(FirstPort)
	for _, w := range want {
		for _, p := range w.Ports {
			if _, ok := out[w.Gateway][p]; ok {
				continue
			}
			for next <= LastPort && taken[next] {
				next++
			}
			if next > LastPort {
				break // out of ports: the listener stays unprogrammed
			}
			out[w.Gateway][p], taken[next] = next, true
		}
	}
	return out
}

// Ports lists the proxy ports of every Gateway, sorted.
func Ports(infra map[types.NamespacedName]Infra) []int {
	var out []int
	for _, in := range infra {
		for _, p := range in.Ports {
			out = append(out, int(p))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// ProxyPort is a proxy port that serves Gateway listeners: plain HTTP,
// HTTPS with TLS's certificates when there are any, or TCP chosen by SNI
// when Stream lists TLS listeners (see Output.TLSPorts).
type ProxyPort struct {
	Port   int
	TLS    []TLSCert
	Stream []TLSCert
}

// ProxyPorts lists the output's proxy ports, by number.
func (o *Output) ProxyPorts() []ProxyPort {
	var out []ProxyPort
	for p := range o.ByPort {
		out = append(out, ProxyPort{Port: p, TLS: o.TLS[p], Stream: o.TLSPorts[p]})
	}
	slices.SortFunc(out, func(a, b ProxyPort) int { return a.Port - b.Port })
	return out
}

// Equal reports whether two lists serve the same ports with the same
// certificates.
func Equal(a, b []ProxyPort) bool {
	return slices.EqualFunc(a, b, func(x, y ProxyPort) bool {
		return x.Port == y.Port && slices.Equal(x.TLS, y.TLS) && slices.Equal(x.Stream, y.Stream)
	})
}
