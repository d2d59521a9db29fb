package proxy

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/svcstate"
)

// ep describes an endpoint compactly: "1r" is 10.0.0.1 ready and remote;
// flags: r ready, s serving-terminating, x terminating-not-serving, n not
// ready, L local; "z:zone" and "h:node" add hints.
func ep(spec string) svcstate.Endpoint {
	f := strings.Fields(spec)
	var e svcstate.Endpoint
	var n int
	var flags string
	fmt.Sscanf(f[0], "%d%s", &n, &flags)
	e.IP = netip.AddrFrom4([4]byte{10, 0, 0, byte(n)})
	e.Port = 80
	for _, c := range flags {
		switch c {
		case 'r':
			e.Ready, e.Serving = true, true
		case 's':
			e.Serving, e.Terminating = true, true
		case 'x':
			e.Terminating = true
		case 'L':
			e.IsLocal = true
			e.NodeName = "me"
		}
	}
	for _, h := range f[1:] {
		switch {
		case strings.HasPrefix(h, "z:"):
			e.ZoneHints = append(e.ZoneHints, h[2:])
		case strings.HasPrefix(h, "h:"):
			e.NodeHints = append(e.NodeHints, h[2:])
		}
	}
	return e
}

func eps(specs ...string) []svcstate.Endpoint {
	var out []svcstate.Endpoint
	for _, s := range specs {
		out = append(out, ep(s))
	}
	return out
}

func ips(eps []svcstate.Endpoint) string {
	var s []string
	for _, e := range eps {
		s = append(s, e.IP.String())
	}
	if s == nil {
		return "-"
	}
	return strings.Join(s, ",")
}

func TestSelect(t *testing.T) {
	clusterIP := &svcstate.ServicePort{ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.1")}}
	itpLocal := &svcstate.ServicePort{ClusterIPs: clusterIP.ClusterIPs, InternalPolicyLocal: true}
	etpLocal := &svcstate.ServicePort{ClusterIPs: clusterIP.ClusterIPs, NodePort: 30000, ExternalPolicyLocal: true}
	bothLocal := &svcstate.ServicePort{ClusterIPs: clusterIP.ClusterIPs, NodePort: 30000, ExternalPolicyLocal: true, InternalPolicyLocal: true}
	node := Node{Name: "me", Zone: "z1"}

	cases := []struct {
		name                      string
		port                      *svcstate.ServicePort
		eps                       []svcstate.Endpoint
		cluster, local, reachable string
		hasAny                    bool
		internal, external        Verdict
	}{
		{"ready only", clusterIP, eps("1r", "2n", "3s"), "10.0.0.1", "-", "10.0.0.1", true, Forward, Forward},
		{"terminating fallback", clusterIP, eps("1n", "2s", "3x", "4s"), "10.0.0.2,10.0.0.4", "-", "10.0.0.2,10.0.0.4", true, Forward, Forward},
		{"nothing usable", clusterIP, eps("1n", "2x"), "-", "-", "-", false, Reject, Reject},
		{"no endpoints at all", clusterIP, nil, "-", "-", "-", false, Reject, Reject},
		{"itp local", itpLocal, eps("1r", "2rL", "3rL"), "-", "10.0.0.2,10.0.0.3", "10.0.0.2,10.0.0.3", true, Forward, Forward},
		{"itp local without local endpoints", itpLocal, eps("1r", "2r"), "-", "-", "-", true, Drop, Forward},
		{"itp local terminating fallback is local only", itpLocal, eps("1r", "2sL"), "-", "10.0.0.2", "10.0.0.2", true, Forward, Forward},
		{"etp local", etpLocal, eps("1r", "2rL"), "10.0.0.1,10.0.0.2", "10.0.0.2", "10.0.0.1,10.0.0.2", true, Forward, Forward},
		{"etp local without local endpoints", etpLocal, eps("1r", "2r"), "10.0.0.1,10.0.0.2", "-", "10.0.0.1,10.0.0.2", true, Forward, Drop},
		// Local falls back to the local terminating endpoint while Cluster
		// still has a ready one elsewhere: both must be reachable.
		{"etp local, local terminating", etpLocal, eps("1r", "2sL"), "10.0.0.1", "10.0.0.2", "10.0.0.1,10.0.0.2", true, Forward, Forward},
		{"etp local, nothing anywhere", etpLocal, eps("1n"), "-", "-", "-", false, Reject, Reject},
		{"both local", bothLocal, eps("1r", "2rL"), "10.0.0.1,10.0.0.2", "10.0.0.2", "10.0.0.1,10.0.0.2", true, Forward, Forward},
		{"zone hints apply", clusterIP, eps("1r z:z1", "2r z:z2", "3rL z:z1"), "10.0.0.1,10.0.0.3", "-", "10.0.0.1,10.0.0.3", true, Forward, Forward},
		{"zone hints ignored when one is missing", clusterIP, eps("1r z:z1", "2r", "3n"), "10.0.0.1,10.0.0.2", "-", "10.0.0.1,10.0.0.2", true, Forward, Forward},
		{"zone hints ignored when none for this zone", clusterIP, eps("1r z:z2", "2r z:z3"), "10.0.0.1,10.0.0.2", "-", "10.0.0.1,10.0.0.2", true, Forward, Forward},
		{"node hints win over zone hints", clusterIP, eps("1r z:z1 h:me", "2r z:z1 h:other"), "10.0.0.1", "-", "10.0.0.1", true, Forward, Forward},
		{"etp local with zone hints merges local", etpLocal, eps("1r z:z1", "2rL z:z2"), "10.0.0.1", "10.0.0.2", "10.0.0.1,10.0.0.2", true, Forward, Forward},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := Select(c.port, c.eps, node)
			if got := ips(s.Cluster); got != c.cluster {
				t.Errorf("cluster = %s, want %s", got, c.cluster)
			}
			if got := ips(s.Local); got != c.local {
				t.Errorf("local = %s, want %s", got, c.local)
			}
			if got := ips(s.Reachable); got != c.reachable {
				t.Errorf("reachable = %s, want %s", got, c.reachable)
			}
			if s.HasAny != c.hasAny {
				t.Errorf("hasAny = %v", s.HasAny)
			}
			if v := s.Internal(c.port); v != c.internal {
				t.Errorf("internal = %v, want %v", v, c.internal)
			}
			if v := s.External(c.port); v != c.external {
				t.Errorf("external = %v, want %v", v, c.external)
			}
			if !slices.IsSortedFunc(s.Reachable, func(a, b svcstate.Endpoint) int { return strings.Compare(a.String(), b.String()) }) {
				t.Errorf("reachable not ordered: %s", ips(s.Reachable))
			}
		})
	}
}
