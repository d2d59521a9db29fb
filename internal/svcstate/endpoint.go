package svcstate

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Endpoint is one backend of one service port. Values in a Snapshot are
// shared and must not be modified.
type Endpoint struct {
	IP   netip.Addr
	Port int // the target port, resolved per EndpointSlice port name

	Ready       bool
	Serving     bool
	Terminating bool

	NodeName string
	Zone     string
	Hostname string
	IsLocal  bool // on the tracker's node

	// Topology hints, sorted. Empty means the EndpointSlice controller gave
	// none.
	ZoneHints []string
	NodeHints []string
}

// String is "ip:port" ("[ip]:port" for IPv6), the form kube-proxy hashes
// into KUBE-SEP chain names and DNATs to.
func (e Endpoint) String() string {
	return netip.AddrPortFrom(e.IP, uint16(e.Port)).String()
}

func (e Endpoint) equal(o Endpoint) bool {
	return e.IP == o.IP && e.Port == o.Port && e.Ready == o.Ready && e.Serving == o.Serving &&
		e.Terminating == o.Terminating && e.NodeName == o.NodeName && e.Zone == o.Zone &&
		e.Hostname == o.Hostname && e.IsLocal == o.IsLocal &&
		slices.Equal(e.ZoneHints, o.ZoneHints) && slices.Equal(e.NodeHints, o.NodeHints)
}

func endpointsEqual(a, b []Endpoint) bool {
	return slices.EqualFunc(a, b, Endpoint.equal)
}

// SlicePort is a port of an EndpointSlice: which service port it serves
// (by name and protocol), and the target port its endpoints listen on.
type SlicePort struct {
	Name     string
	Protocol v1.Protocol
	Port     int
}

// sliceInfo is the usable content of one EndpointSlice, its endpoints
// without ports.
type sliceInfo struct {
	name            string
	service         types.NamespacedName
	resourceVersion string
	ports           []SlicePort
	portless        bool // the slice has no ports at all (headless, portless service)
	endpoints       []Endpoint
}

// sliceService returns the Service a slice belongs to.
func sliceService(s *discovery.EndpointSlice) (types.NamespacedName, bool) {
	name := s.Labels[discovery.LabelServiceName]
	return types.NamespacedName{Namespace: s.Namespace, Name: name}, name != ""
}

// triggerTime is when the change a slice reflects happened in the API, as
// the EndpointSlice controller recorded it; zero when unknown.
func triggerTime(s *discovery.EndpointSlice) time.Time {
	raw, ok := s.Annotations[v1.EndpointsLastChangeTriggerTime]
	if !ok {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, raw)
	if err != nil {
		return time.Time{}
	}
	return t
}

// ReadSlice reads an EndpointSlice by the rules every consumer shares —
// the proxy modes and the ingress through the Tracker's snapshots, the
// DNS directly: its usable ports, and its endpoints (without a port; one
// address each, the first, as kube-proxy reads it; addresses that are
// malformed, special, of the other family or repeated are dropped;
// ready unless the API says otherwise, serving as ready unless said).
// ok is false for a slice that carries nothing usable (no service label,
// FQDN or unknown addresses). report, if not nil, gets each piece
// dropped.
func ReadSlice(s *discovery.EndpointSlice, report func(BadInput)) (ports []SlicePort, endpoints []Endpoint, ok bool) {
	if report == nil {
		report = func(BadInput) {}
	}
	info := parseSlice(s, "", report)
	if info == nil {
		return nil, nil, false
	}
	return info.ports, info.endpoints, true
}

// parseSlice keeps what a proxy can use of an EndpointSlice. It returns
// nil for slices that carry nothing for us (FQDN slices, no service label).
func parseSlice(s *discovery.EndpointSlice, nodeName string, report func(BadInput)) *sliceInfo {
	objName := types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
	bad := func(field, value string, r Reason) {
		report(BadInput{Kind: KindEndpointSlice, Object: objName, Field: field, Value: value, Reason: r})
	}
	svc, ok := sliceService(s)
	if !ok {
		bad("metadata.labels", discovery.LabelServiceName, ReasonMissingServiceName)
		return nil
	}
	var family v1.IPFamily
	switch s.AddressType {
	case discovery.AddressTypeIPv4:
		family = v1.IPv4Protocol
	case discovery.AddressTypeIPv6:
		family = v1.IPv6Protocol
	case discovery.AddressTypeFQDN:
		return nil // valid, but nothing a proxy can DNAT to
	default:
		bad("addressType", string(s.AddressType), ReasonUnknownAddressType)
		return nil
	}

	info := &sliceInfo{name: s.Name, service: svc, resourceVersion: s.ResourceVersion, portless: len(s.Ports) == 0}
	for i, p := range s.Ports {
		field := fmt.Sprintf("ports[%d]", i)
		if p.Port == nil {
			// Valid in the API ("all ports"), but there is nothing to DNAT to.
			continue
		}
		proto := v1.ProtocolTCP
		if p.Protocol != nil {
			proto = *p.Protocol
		}
		if !validProtocol(proto) {
			bad(field+".protocol", string(proto), ReasonUnknownProtocol)
			continue
		}
		if !validPort(*p.Port) {
			bad(field+".port", strconv.Itoa(int(*p.Port)), ReasonPortOutOfRange)
			continue
		}
		name := ""
		if p.Name != nil {
			name = *p.Name
		}
		if slices.ContainsFunc(info.ports, func(q SlicePort) bool { return q.Name == name && q.Protocol == proto }) {
			bad(field, name+"/"+string(proto), ReasonDuplicate)
			continue
		}
		info.ports = append(info.ports, SlicePort{Name: name, Protocol: proto, Port: int(*p.Port)})
	}

	seen := make(map[netip.Addr]bool, len(s.Endpoints))
	for i, ep := range s.Endpoints {
		field := fmt.Sprintf("endpoints[%d].addresses[0]", i)
		addr := EndpointAddress(ep)
		if addr == "" {
			bad(fmt.Sprintf("endpoints[%d].addresses", i), "", ReasonMissingAddress)
			continue
		}
		a, r := parseIP(addr)
		switch {
		case r != "":
			bad(field, addr, r)
			continue
		case Family(a) != family:
			bad(field, addr, ReasonWrongFamily)
			continue
		case seen[a]:
			bad(field, addr, ReasonDuplicate)
			continue
		}
		seen[a] = true
		ready := EndpointReady(ep.Conditions)
		// The API says a nil serving condition defers to ready.
		serving := ready
		if ep.Conditions.Serving != nil {
			serving = *ep.Conditions.Serving
		}
		e := Endpoint{
			IP:          a,
			Ready:       ready,
			Serving:     serving,
			Terminating: ep.Conditions.Terminating != nil && *ep.Conditions.Terminating,
			NodeName:    deref(ep.NodeName),
			Zone:        deref(ep.Zone),
			Hostname:    deref(ep.Hostname),
		}
		e.IsLocal = nodeName != "" && e.NodeName == nodeName
		if ep.Hints != nil {
			for _, z := range ep.Hints.ForZones {
				e.ZoneHints = append(e.ZoneHints, z.Name)
			}
			for _, n := range ep.Hints.ForNodes {
				e.NodeHints = append(e.NodeHints, n.Name)
			}
			e.ZoneHints = sortedUnique(e.ZoneHints)
			e.NodeHints = sortedUnique(e.NodeHints)
		}
		info.endpoints = append(info.endpoints, e)
	}
	return info
}

// mergeEndpoints combines the slices of one service (ordered by slice name)
// into endpoints per service port. An endpoint listed by two slices, which
// happens briefly while the EndpointSlice controller moves endpoints
// between slices, is kept once: the first one, unless a later one is local,
// exactly as kube-proxy decides.
func mergeEndpoints(svc types.NamespacedName, slicesByName []*sliceInfo) map[ServicePortName][]Endpoint {
	if len(slicesByName) == 0 {
		return nil
	}
	type key struct {
		spn ServicePortName
		ep  netip.AddrPort
	}
	out := map[ServicePortName][]Endpoint{}
	index := map[key]int{}
	add := func(spn ServicePortName, e Endpoint) {
		k := key{spn, netip.AddrPortFrom(e.IP, uint16(e.Port))}
		if i, dup := index[k]; dup {
			if e.IsLocal && !out[spn][i].IsLocal {
				out[spn][i] = e
			}
			return
		}
		index[k] = len(out[spn])
		out[spn] = append(out[spn], e)
	}
	for _, s := range slicesByName {
		if s.portless {
			spn := ServicePortName{NamespacedName: svc}
			for _, e := range s.endpoints {
				add(spn, e)
			}
			continue
		}
		for _, p := range s.ports {
			spn := ServicePortName{NamespacedName: svc, Port: p.Name, Protocol: p.Protocol}
			for _, e := range s.endpoints {
				e.Port = p.Port
				add(spn, e)
			}
		}
	}
	for _, eps := range out {
		sortEndpoints(eps)
	}
	return out
}

// sortEndpoints orders endpoints by their "ip:port" string, which is
// kube-proxy's order (so "10.0.0.10:80" sorts before "10.0.0.2:80") and
// therefore the order of the probability rules.
func sortEndpoints(eps []Endpoint) {
	if len(eps) < 2 {
		return
	}
	type keyed struct {
		key string
		ep  Endpoint
	}
	ks := make([]keyed, len(eps))
	for i, e := range eps {
		ks[i] = keyed{e.String(), e}
	}
	slices.SortFunc(ks, func(a, b keyed) int { return strings.Compare(a.key, b.key) })
	for i := range ks {
		eps[i] = ks[i].ep
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func sortedUnique(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}

// Usable picks the endpoints a consumer without a node (the ingress)
// sends to, by kube-proxy's rule for cluster traffic: the ready ones, else
// those that are terminating but still serving, so that a Service whose
// every pod is shutting down drains instead of failing.
func Usable(eps []Endpoint) []Endpoint {
	var ready, draining []Endpoint
	for _, e := range eps {
		switch {
		case e.Ready:
			ready = append(ready, e)
		case e.Serving && e.Terminating:
			draining = append(draining, e)
		}
	}
	if len(ready) > 0 {
		return ready
	}
	return draining
}

// EndpointReady reads an endpoint's ready condition as the API defines
// it: unset means ready. Proxies route new connections to ready
// endpoints (and to serving, terminating ones only when a Service has no
// ready one).
func EndpointReady(c discovery.EndpointConditions) bool { return c.Ready == nil || *c.Ready }

// EndpointAddress is the one address of an endpoint that proxies route
// to: the first (the API allows exactly one today), "" if none.
func EndpointAddress(ep discovery.Endpoint) string {
	if len(ep.Addresses) == 0 {
		return ""
	}
	return ep.Addresses[0]
}
