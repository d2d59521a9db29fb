package iptables

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svcnet/svcnet/internal/svcstate"
)

// The expected names are those kube-proxy gives the services every
// cluster has, as they appear in countless iptables-save dumps.
func TestChainNamesMatchKubeProxy(t *testing.T) {
	cases := []struct {
		ns, name, port string
		proto          v1.Protocol
		want           string
	}{
		{"default", "kubernetes", "https", v1.ProtocolTCP, "KUBE-SVC-NPX46M4PTMTKRN6Y"},
		{"kube-system", "kube-dns", "dns", v1.ProtocolUDP, "KUBE-SVC-TCOU7JCQXEZGVUNU"},
		{"kube-system", "kube-dns", "dns-tcp", v1.ProtocolTCP, "KUBE-SVC-ERIFXISQEP7F7OF4"},
		{"kube-system", "kube-dns", "metrics", v1.ProtocolTCP, "KUBE-SVC-JD5MR3NA4I4DYORP"},
	}
	for _, c := range cases {
		n := svcstate.ServicePortName{NamespacedName: types.NamespacedName{Namespace: c.ns, Name: c.name}, Port: c.port, Protocol: c.proto}
		ch := ChainsFor(n)
		if ch.Cluster != c.want {
			t.Errorf("%s: got %s, want %s", n, ch.Cluster, c.want)
		}
		suffix := c.want[len("KUBE-SVC-"):]
		if ch.Local != "KUBE-SVL-"+suffix || ch.External != "KUBE-EXT-"+suffix || ch.Firewall != "KUBE-FW-"+suffix {
			t.Errorf("%s: %+v", n, ch)
		}
		if ep := EndpointChain(n, "10.244.0.2:53"); len(ep) != len("KUBE-SEP-")+16 || !IsServiceChain(ep) {
			t.Errorf("endpoint chain %q", ep)
		}
	}
	if IsServiceChain("KUBE-SERVICES") || IsServiceChain("KUBE-NODEPORTS") || IsServiceChain("DOCKER") {
		t.Error("top-level chains are not service chains")
	}
}
