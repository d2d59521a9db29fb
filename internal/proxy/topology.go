package proxy

import (
	"slices"
	"strings"

	"github.com/svcnet/svcnet/internal/svcstate"
)

// Node is what endpoint selection needs to know about the node the proxy
// programs.
type Node struct {
	Name string
	Zone string // the node's topology.kubernetes.io/zone label
}

// Verdict is what a proxy does with traffic for a service port.
type Verdict int

const (
	// Forward: there are endpoints to send the traffic to.
	Forward Verdict = iota
	// Reject: the service has no usable endpoint anywhere; the client gets
	// an immediate error (ICMP port unreachable / TCP reset).
	Reject
	// Drop: the policy is Local and this node has no usable endpoint, but
	// others do; a load balancer health check will steer clients elsewhere,
	// so the packet is silently dropped.
	Drop
)

func (v Verdict) String() string {
	switch v {
	case Forward:
		return "forward"
	case Reject:
		return "reject"
	case Drop:
		return "drop"
	}
	return "unknown"
}

// Selection is the outcome of endpoint selection for one service port, as
// kube-proxy's CategorizeEndpoints computes it.
type Selection struct {
	// Cluster holds the endpoints for Cluster traffic policy, nil when the
	// port never uses it.
	Cluster []svcstate.Endpoint
	// Local holds this node's endpoints for Local traffic policy, nil when
	// the port never uses it or the node has none.
	Local []svcstate.Endpoint
	// Reachable is the union of both, ordered: every endpoint a rule of
	// this node may send to.
	Reachable []svcstate.Endpoint
	// HasAny says whether a usable endpoint exists anywhere in the
	// cluster, even when none is reachable from here.
	HasAny bool
}

// Internal is the verdict for traffic to the cluster IP.
func (s Selection) Internal(p *svcstate.ServicePort) Verdict { return s.verdict(p.InternalPolicyLocal) }

// External is the verdict for traffic from outside the cluster to a node
// port, external IP or load-balancer IP.
func (s Selection) External(p *svcstate.ServicePort) Verdict { return s.verdict(p.ExternalPolicyLocal) }

// verdict is Reject when no endpoint exists, Drop when the traffic policy
// is Local and this node has none, and Forward otherwise.
func (s Selection) verdict(policyLocal bool) Verdict {
	switch {
	case !s.HasAny:
		return Reject
	case policyLocal && len(s.Local) == 0:
		return Drop
	}
	return Forward
}

// Select picks the endpoints of one service port that a node uses, with
// kube-proxy's rules: ready endpoints, else serving-and-terminating ones
// (decided separately for Cluster and Local policy); topology hints when
// every ready endpoint has one and some point at this node or zone; only
// this node's endpoints for Local policies. p and eps must be of one IP
// family.
func Select(p *svcstate.ServicePort, eps []svcstate.Endpoint, node Node) Selection {
	var s Selection
	usesCluster, usesLocal := p.UsesClusterEndpoints(), p.UsesLocalEndpoints()
	var mode hintMode
	if usesCluster {
		mode = hintModeFor(eps, node)
		s.Cluster = filterEndpoints(eps, func(e *svcstate.Endpoint) bool { return e.Ready && mode.allows(e, node) })
		if len(s.Cluster) == 0 {
			// Topology was already ignored if it left nothing ready, so
			// nothing is ready anywhere: fall back to endpoints that are
			// shutting down but still serving, to drain gracefully.
			s.Cluster = filterEndpoints(eps, func(e *svcstate.Endpoint) bool { return e.Serving && e.Terminating })
		}
		s.HasAny = len(s.Cluster) > 0
	}
	if !usesLocal {
		s.Reachable = s.Cluster
		return s
	}

	var localReady, localServingTerminating bool
	for i := range eps {
		e := &eps[i]
		switch {
		case e.Ready:
			s.HasAny = true
			localReady = localReady || e.IsLocal
		case e.Serving && e.Terminating:
			s.HasAny = true
			localServingTerminating = localServingTerminating || e.IsLocal
		}
	}
	servingTerminating := false
	switch {
	case localReady:
		s.Local = filterEndpoints(eps, func(e *svcstate.Endpoint) bool { return e.IsLocal && e.Ready })
	case localServingTerminating:
		servingTerminating = true
		s.Local = filterEndpoints(eps, func(e *svcstate.Endpoint) bool { return e.IsLocal && e.Serving && e.Terminating })
	}
	if !usesCluster {
		s.Reachable = s.Local
		return s
	}
	if mode == hintNone && !servingTerminating {
		// Cluster holds every ready endpoint and Local only ready ones, so
		// Cluster already contains Local.
		s.Reachable = s.Cluster
		return s
	}
	s.Reachable = unionEndpoints(s.Cluster, s.Local)
	return s
}

type hintMode int

const (
	hintNone hintMode = iota
	hintSameZone
	hintSameNode
)

// hintModeFor decides whether topology hints apply: only when every ready
// endpoint carries one and at least one points at this node (or zone);
// otherwise hints are ignored, so that traffic never goes nowhere.
func hintModeFor(eps []svcstate.Endpoint, node Node) hintMode {
	allNode, allZone := true, true
	forNode, forZone := false, false
	for i := range eps {
		e := &eps[i]
		if !e.Ready {
			continue
		}
		if len(e.NodeHints) == 0 {
			allNode = false
		} else if slices.Contains(e.NodeHints, node.Name) {
			forNode = true
		}
		if len(e.ZoneHints) == 0 {
			allZone = false
		} else if slices.Contains(e.ZoneHints, node.Zone) {
			forZone = true
		}
	}
	switch {
	case allNode && forNode:
		return hintSameNode
	case allZone && forZone:
		return hintSameZone
	}
	return hintNone
}

func (m hintMode) allows(e *svcstate.Endpoint, node Node) bool {
	switch m {
	case hintSameNode:
		return slices.Contains(e.NodeHints, node.Name)
	case hintSameZone:
		return slices.Contains(e.ZoneHints, node.Zone)
	}
	return true
}

func filterEndpoints(eps []svcstate.Endpoint, keep func(*svcstate.Endpoint) bool) []svcstate.Endpoint {
	var out []svcstate.Endpoint
	for i := range eps {
		if keep(&eps[i]) {
			out = append(out, eps[i])
		}
	}
	return out
}

// unionEndpoints merges two lists in "ip:port" order, each endpoint once.
func unionEndpoints(a, b []svcstate.Endpoint) []svcstate.Endpoint {
	out := slices.Concat(a, b)
	slices.SortStableFunc(out, func(x, y svcstate.Endpoint) int { return strings.Compare(x.String(), y.String()) })
	return slices.CompactFunc(out, func(x, y svcstate.Endpoint) bool { return x.IP == y.IP && x.Port == y.Port })
}
