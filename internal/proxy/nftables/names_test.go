package nftables

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svcnet/svcnet/internal/svcstate"
)

// TestNames: the examples kube-proxy's nftables mode documents for its
// names come out the same, so a table written by either reads alike.
func TestNames(t *testing.T) {
	p80 := svcstate.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "ns1", Name: "svc1"}, Port: "p80", Protocol: v1.ProtocolTCP}
	long := svcstate.ServicePortName{NamespacedName: types.NamespacedName{Namespace: strings.Repeat("n", 63), Name: strings.Repeat("s", 63)},
		Port: strings.Repeat("p", 63), Protocol: v1.ProtocolSCTP}
	cases := []struct {
		name, got, want string
	}{
		{"service port", ServicePortBase(p80), "ULMVA6XW-ns1/svc1/tcp/p80"},
		{"endpoint", EndpointBase(p80, "10.180.0.1:80"), "5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80"},
		{"IPv6 endpoint: no colons", EndpointBase(p80, "[fd00:10:180::1]:80")[9:], "ns1/svc1/tcp/p80__fd00.10.180..1/80"},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s: %q, want %q", c.name, c.got, c.want)
		}
	}
	// The longest possible endpoint name is shortened, and stays unique.
	a, b := EndpointBase(long, "[fd00:1111:2222:3333:4444:5555:6666:7777]:65535"), EndpointBase(long, "[fd00:1111:2222:3333:4444:5555:6666:7778]:65535")
	if len(a) != maxBase || !strings.HasSuffix(a, "...") || a == b {
		t.Errorf("long names: %d bytes %q / %q", len(a), a, b)
	}
	if !IsServiceChain(PrefixService+ServicePortBase(p80)) || IsServiceChain("services") || IsServiceChain("nat-prerouting") {
		t.Error("IsServiceChain")
	}
}
