package index

import (
	"cmp"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/svcnet/svcnet/internal/cow"
)

// Shard counts of the zone's maps, groups × shards per group: enough
// that a shard of a zone of 100,000 Services holds a few dozen names and
// a group a hundred shards, so the copies a change makes cost
// microseconds.
const (
	nodeGroups, nodeShards = 128, 128
	podGroups, podShards   = 16, 16
)

// source is who contributed to the zone: a Service, or the apex (the zero
// value, first in the order).
type source struct{ ns, name string }

func compareSources(a, b source) int {
	return cmp.Or(strings.Compare(a.ns, b.ns), strings.Compare(a.name, b.name))
}

// nameState is what the zone knows of one name: how many contributions
// make it exist, and which of them (in order) have records at it.
type nameState struct {
	refs    int
	sources []source
}

// Updater keeps the cluster zone up to date one object at a time and
// publishes it as immutable Index snapshots. A change to one Service
// recomputes that Service's contribution alone and rebuilds only the
// names it touches; a snapshot shares every unchanged shard of names
// with the one before, so its cost is the size of the change, not of the
// zone. The Index it publishes is the one Build makes from the same
// objects. An Updater is not safe for concurrent use; its snapshots are.
type Updater struct {
	zone    string
	ttl     uint32
	pods    PodsMode
	synced  bool
	reverse []netip.Prefix

	origin      uint64
	contribs    map[source]*contribution
	names       map[string]*nameState
	nodes       cow.Map[string, *Node]
	services    int
	nameservers []netip.Addr
	serial      uint32 // of the apex's SOA now in nodes; 0 before the first snapshot
	apexDirty   bool

	// Pods: what each pod added, the counts behind the published sets,
	// and the published sets.
	podAddrs   map[string][]podAddr
	podCount   map[nsAddr]int
	nsCount    map[string]int
	clientRefs map[netip.Addr]map[string]int
	podIPs     cow.Map[nsAddr, struct{}]
	podNS      cow.Map[string, struct{}]
	clientNS   cow.Map[netip.Addr, string]
}

// podAddr is one address a pod gives its namespace, and whether the pod
// uses the cluster's search path (for autopath).
type podAddr struct {
	ns     string
	ip     netip.Addr
	search bool
}

// NewUpdater returns an empty zone with opts (its Serial, Nameservers and
// objects are given later).
func NewUpdater(opts Options) *Updater {
	zone := Canonical(cmp.Or(strings.TrimSuffix(opts.Zone, "."), DefaultZone))
	return &Updater{
		origin:     ids.Add(1),
		zone:       zone,
		ttl:        cmp.Or(opts.TTL, DefaultTTL),
		pods:       opts.Pods,
		synced:     !opts.NotSynced,
		reverse:    slices.Clone(opts.ReverseCIDRs),
		contribs:   map[source]*contribution{},
		names:      map[string]*nameState{},
		nodes:      cow.New[string, *Node](nodeGroups, nodeShards, cow.String),
		apexDirty:  true,
		podAddrs:   map[string][]podAddr{},
		podCount:   map[nsAddr]int{},
		nsCount:    map[string]int{},
		clientRefs: map[netip.Addr]map[string]int{},
		podIPs:     cow.New[nsAddr, struct{}](podGroups, podShards, hashNSAddr),
		podNS:      cow.New[string, struct{}](podGroups, podShards, cow.String),
		clientNS:   cow.New[netip.Addr, string](podGroups, podShards, cow.Addr),
	}
}

// SetNameservers sets the addresses of ns.dns.<zone> (the kube-dns
// Service's cluster IPs).
func (z *Updater) SetNameservers(ips []netip.Addr) {
	if !slices.Equal(ips, z.nameservers) {
		z.nameservers = slices.Clone(ips)
		z.apexDirty = true
	}
}

// SetService replaces what the Service ns/name contributes with what svc
// and its EndpointSlices give; a nil svc removes it.
func (z *Updater) SetService(ns, name string, svc *corev1.Service, svcSlices []*discoveryv1.EndpointSlice) {
	var c *contribution
	if svc != nil {
		c = service(z.zone, z.ttl, svc, svcSlices)
	}
	z.setContribution(source{ns, name}, c)
}

// setContribution swaps src's contribution for c (nil: none) and
// rebuilds the names either of them touches.
func (z *Updater) setContribution(src source, c *contribution) {
	old := z.contribs[src]
	if old == nil && c == nil {
		return
	}
	touched := map[string]struct{}{}
	if old != nil {
		z.services -= old.service
		for name := range old.names {
			st := z.names[name]
			st.refs--
			touched[name] = struct{}{}
		}
		for _, owner := range old.owners {
			st := z.names[owner]
			st.sources = slices.DeleteFunc(st.sources, func(s source) bool { return s == src })
		}
		delete(z.contribs, src)
	}
	if c != nil {
		z.services += c.service
		z.contribs[src] = c
		for name := range c.names {
			st := z.names[name]
			if st == nil {
				st = &nameState{}
				z.names[name] = st
			}
			st.refs++
			touched[name] = struct{}{}
		}
		for _, owner := range c.owners {
			st := z.names[owner]
			i, _ := slices.BinarySearchFunc(st.sources, src, compareSources)
			st.sources = slices.Insert(st.sources, i, src)
		}
	}
	for name := range touched {
		z.rebuild(name)
	}
}

// rebuild makes the node at name from the contributions with records
// there, in source order (the apex, then Services by namespace and name),
// as Build would.
func (z *Updater) rebuild(name string) {
	st := z.names[name]
	if st == nil || st.refs <= 0 {
		delete(z.names, name)
		z.nodes.Delete(name)
		return
	}
	n := &Node{}
	var seen map[rrKey]struct{}
	if len(st.sources) > 1 {
		seen = map[rrKey]struct{}{}
	}
	for _, src := range st.sources {
		for _, r := range z.contribs[src].records[name] {
			t := r.rr.Header().Rrtype
			if seen != nil {
				k := rrKey{name, t, r.data}
				if _, dup := seen[k]; dup {
					continue
				}
				seen[k] = struct{}{}
			}
			n.add(t, r.rr)
		}
	}
	z.nodes.Set(name, n)
}

func (n *Node) add(t uint16, rr dns.RR) {
	for i := range n.rrsets {
		if n.rrsets[i].typ == t {
			n.rrsets[i].rrs = append(n.rrsets[i].rrs, rr)
			return
		}
	}
	n.rrsets = append(n.rrsets, rrset{typ: t, rrs: []dns.RR{rr}})
}

// SetPod replaces what the pod key (namespace/name) contributes with what
// p gives: its addresses in verified mode, and for autopath the
// namespace its address asks from; a nil p removes it.
func (z *Updater) SetPod(key string, p *corev1.Pod) {
	var addrs []podAddr
	if p != nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed && isLabel(p.Namespace) {
		// A finished pod's IP may already belong to another pod.
		ips := make([]string, 0, len(p.Status.PodIPs)+1)
		for _, pip := range p.Status.PodIPs {
			ips = append(ips, pip.IP)
		}
		if len(ips) == 0 && p.Status.PodIP != "" {
			ips = append(ips, p.Status.PodIP)
		}
		search := usesClusterSearch(p)
		for _, s := range ips {
			ip, err := netip.ParseAddr(s)
			if err != nil || ip.Zone() != "" {
				continue
			}
			addrs = append(addrs, podAddr{p.Namespace, ip.Unmap(), search})
		}
	}
	old := z.podAddrs[key]
	if len(old) == 0 && len(addrs) == 0 {
		return
	}
	for _, a := range old {
		z.podAddr(a, -1)
	}
	for _, a := range addrs {
		z.podAddr(a, 1)
	}
	if len(addrs) == 0 {
		delete(z.podAddrs, key)
	} else {
		z.podAddrs[key] = addrs
	}
}

// podAddr counts a pod address in (d = 1) or out (d = -1) and updates the
// published sets where a count crosses zero.
func (z *Updater) podAddr(a podAddr, d int) {
	if z.pods == PodsVerified {
		k := nsAddr{a.ns, a.ip}
		z.podCount[k] += d
		switch z.podCount[k] {
		case 0:
			delete(z.podCount, k)
			z.podIPs.Delete(k)
		case d:
			z.podIPs.Set(k, struct{}{})
		}
		z.nsCount[a.ns] += d
		switch z.nsCount[a.ns] {
		case 0:
			delete(z.nsCount, a.ns)
			z.podNS.Delete(a.ns)
		case d:
			z.podNS.Set(a.ns, struct{}{})
		}
	}
	if !a.search {
		return
	}
	refs := z.clientRefs[a.ip]
	if refs == nil {
		refs = map[string]int{}
		z.clientRefs[a.ip] = refs
	}
	refs[a.ns] += d
	if refs[a.ns] == 0 {
		delete(refs, a.ns)
	}
	// An address claimed by pods of two namespaces says nothing.
	switch len(refs) {
	case 0:
		delete(z.clientRefs, a.ip)
		z.clientNS.Delete(a.ip)
	case 1:
		for ns := range refs {
			if cur, ok := z.clientNS.Get(a.ip); !ok || cur != ns {
				z.clientNS.Set(a.ip, ns)
			}
		}
	default:
		z.clientNS.Delete(a.ip)
	}
}

// Snapshot publishes the zone as it is now, with serial in its SOA
// records (at least 1). The zone goes on changing; the Index never does.
func (z *Updater) Snapshot(serial uint32) *Index {
	serial = max(serial, 1)
	soa := newSOA(z.zone, z.zone, z.ttl, serial)
	if z.apexDirty || serial != z.serial {
		z.setContribution(source{}, apex(z.zone, z.ttl, z.pods, soa, z.nameservers))
		z.serial, z.apexDirty = serial, false
	} else {
		soa = z.contribs[source{}].records[z.zone][0].rr.(*dns.SOA)
	}
	return &Index{
		zone:     z.zone,
		podZone:  "pod." + z.zone,
		ttl:      z.ttl,
		pods:     z.pods,
		synced:   z.synced,
		reverse:  z.reverse,
		soa:      soa,
		soaV4:    newSOA("in-addr.arpa.", z.zone, z.ttl, serial),
		soaV6:    newSOA("ip6.arpa.", z.zone, z.ttl, serial),
		nodes:    z.nodes.Freeze(),
		podIPs:   z.podIPs.Freeze(),
		podNS:    z.podNS.Freeze(),
		clientNS: z.clientNS.Freeze(),
		services: z.services,
		origin:   z.origin,
		gen:      ids.Add(1),
	}
}

// ids numbers Updaters and snapshots.
var ids atomic.Uint64
