package index

import (
	"cmp"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Build makes the index for one snapshot of the cluster. It reads the
// objects and never keeps or changes them. Objects that cannot be named in
// DNS (bad labels, unparsable addresses) are skipped rather than failing
// the whole zone: one odd object must not take every name down.
//
// Input order does not matter; the records come out in a stable order, so
// the same snapshot always gives byte-identical answers.
func Build(opts Options, services []*corev1.Service, endpointSlices []*discoveryv1.EndpointSlice, pods []*corev1.Pod) *Index {
	zone := Canonical(cmp.Or(strings.TrimSuffix(opts.Zone, "."), DefaultZone))
	ttl := cmp.Or(opts.TTL, DefaultTTL)
	// Maps sized up front: growing them costs a tenth of a build.
	size := 4*len(services) + 2*len(endpointSlices) + 16
	ix := &Index{
		zone:     zone,
		podZone:  "pod." + zone,
		ttl:      ttl,
		pods:     opts.Pods,
		synced:   !opts.NotSynced,
		reverse:  slices.Clone(opts.ReverseCIDRs),
		nodes:    make(map[string]*Node, size),
		podIPs:   map[string]map[netip.Addr]struct{}{},
		clientNS: map[netip.Addr]string{},
	}
	ix.soa = newSOA(zone, zone, ttl, opts.Serial)
	ix.soaV4 = newSOA("in-addr.arpa.", zone, ttl, opts.Serial)
	ix.soaV6 = newSOA("ip6.arpa.", zone, ttl, opts.Serial)

	b := &builder{ix: ix, seen: make(map[rrKey]struct{}, size)}
	b.apex(opts.Nameservers)
	if !opts.NotSynced {
		bySvc := groupSlices(endpointSlices)
		for _, svc := range sortedServices(services) {
			b.service(svc, bySvc[svc.Namespace+"/"+svc.Name])
		}
		b.pods(pods)
	}
	b.emptyNonTerminals()
	b.srvWeights()
	return ix
}

type rrKey struct {
	owner string
	typ   uint16
	data  string
}

type builder struct {
	ix   *Index
	seen map[rrKey]struct{}
}

// add puts rr at its owner unless the same data is already there: several
// EndpointSlices of one Service may list the same endpoint while the
// controller moves it between slices.
func (b *builder) add(rr dns.RR, data string) {
	h := rr.Header()
	k := rrKey{h.Name, h.Rrtype, data}
	if _, dup := b.seen[k]; dup {
		return
	}
	b.seen[k] = struct{}{}
	n := b.node(h.Name)
	for i := range n.rrsets {
		if n.rrsets[i].typ == h.Rrtype {
			n.rrsets[i].rrs = append(n.rrsets[i].rrs, rr)
			return
		}
	}
	n.rrsets = append(n.rrsets, rrset{typ: h.Rrtype, rrs: []dns.RR{rr}})
}

func (b *builder) node(name string) *Node {
	n := b.ix.nodes[name]
	if n == nil {
		n = &Node{}
		b.ix.nodes[name] = n
	}
	return n
}

func (b *builder) addr(owner string, ip netip.Addr) {
	b.add(newAddr(owner, b.ix.ttl, ip), ip.String())
}

func (b *builder) ptr(ip netip.Addr, target string) {
	owner := ReverseName(ip)
	b.add(&dns.PTR{Hdr: hdr(owner, dns.TypePTR, b.ix.ttl), Ptr: target}, target)
}

func (b *builder) srv(owner, target string, port uint16) {
	rr := &dns.SRV{Hdr: hdr(owner, dns.TypeSRV, b.ix.ttl), Priority: 0, Weight: 100, Port: port, Target: target}
	b.add(rr, strconv.Itoa(int(port))+" "+target)
}

func (b *builder) apex(nameservers []netip.Addr) {
	ix := b.ix
	b.add(ix.soa, "")
	ns := "ns.dns." + ix.zone
	b.add(&dns.NS{Hdr: hdr(ix.zone, dns.TypeNS, ix.ttl), Ns: ns}, ns)
	b.node(ns)
	for _, ip := range nameservers {
		if ip.IsValid() {
			b.addr(ns, ip.Unmap())
		}
	}
	v := "dns-version." + ix.zone
	b.add(&dns.TXT{Hdr: hdr(v, dns.TypeTXT, ix.ttl), Txt: []string{SchemaVersion}}, SchemaVersion)
	b.node("svc." + ix.zone)
	if ix.pods != PodsDisabled {
		b.node(ix.podZone)
	}
}

func (b *builder) service(svc *corev1.Service, svcSlices []*discoveryv1.EndpointSlice) {
	if !isLabel(svc.Name) || !isLabel(svc.Namespace) {
		return
	}
	ix := b.ix
	ix.services++
	b.node(svc.Namespace + ".svc." + ix.zone)
	name := svc.Name + "." + svc.Namespace + ".svc." + ix.zone

	switch {
	case svc.Spec.Type == corev1.ServiceTypeExternalName:
		// The CNAME is the only record: a CNAME owner can have no other
		// data (RFC 1034 3.6.2), so no SRV records either.
		target := Canonical(strings.TrimSpace(svc.Spec.ExternalName))
		if _, ok := dns.IsDomainName(target); !ok || target == "." || len(target) > 255 {
			b.node(name)
			return
		}
		b.add(&dns.CNAME{Hdr: hdr(name, dns.TypeCNAME, ix.ttl), Target: target}, target)

	case svc.Spec.ClusterIP == corev1.ClusterIPNone:
		b.headless(svc, name, svcSlices)

	default:
		ips := svc.Spec.ClusterIPs
		if len(ips) == 0 && svc.Spec.ClusterIP != "" {
			ips = []string{svc.Spec.ClusterIP}
		}
		// The name exists even before an IP is allocated: NODATA, not
		// NXDOMAIN, so no client caches the Service as missing.
		b.node(name)
		for _, s := range ips {
			ip, err := netip.ParseAddr(s)
			if err != nil || ip.Zone() != "" {
				continue
			}
			ip = ip.Unmap()
			b.addr(name, ip)
			b.ptr(ip, name)
		}
		for _, p := range svc.Spec.Ports {
			if p.Name == "" || p.Port <= 0 || p.Port > 65535 || !isLabel(p.Name) {
				continue
			}
			b.srv(srvName(p.Name, p.Protocol, name), name, uint16(p.Port))
		}
	}
}

type port struct {
	name  string
	proto corev1.Protocol
	port  uint16
}

type endpoint struct {
	ip    netip.Addr
	host  string
	ports []port
}

// headless publishes the endpoints themselves. With no endpoint to publish
// the Service name does not exist (the specification asks for NXDOMAIN).
func (b *builder) headless(svc *corev1.Service, name string, svcSlices []*discoveryv1.EndpointSlice) {
	byIP := map[netip.Addr]*endpoint{}
	for _, sl := range svcSlices {
		if sl.AddressType != discoveryv1.AddressTypeIPv4 && sl.AddressType != discoveryv1.AddressTypeIPv6 {
			continue // FQDN slices carry no address to publish
		}
		var ports []port
		for _, p := range sl.Ports {
			if p.Name == nil || *p.Name == "" || p.Port == nil || *p.Port <= 0 || *p.Port > 65535 || !isLabel(*p.Name) {
				continue
			}
			proto := corev1.ProtocolTCP
			if p.Protocol != nil {
				proto = *p.Protocol
			}
			ports = append(ports, port{*p.Name, proto, uint16(*p.Port)})
		}
		for _, ep := range sl.Endpoints {
			ready := ep.Conditions.Ready == nil || *ep.Conditions.Ready
			if !ready && !svc.Spec.PublishNotReadyAddresses {
				continue
			}
			host := ""
			if ep.Hostname != nil && isLabel(*ep.Hostname) {
				host = strings.ToLower(*ep.Hostname)
			}
			for _, a := range ep.Addresses {
				ip, err := netip.ParseAddr(a)
				if err != nil || ip.Zone() != "" {
					continue
				}
				ip = ip.Unmap()
				e := byIP[ip]
				if e == nil {
					e = &endpoint{ip: ip}
					byIP[ip] = e
				}
				if e.host == "" {
					e.host = host
				}
				e.ports = append(e.ports, ports...)
			}
		}
	}
	eps := make([]*endpoint, 0, len(byIP))
	for _, e := range byIP {
		eps = append(eps, e)
	}
	slices.SortFunc(eps, func(a, b *endpoint) int { return a.ip.Compare(b.ip) })

	for _, e := range eps {
		// The endpoint's own name: its hostname, else its dashed address,
		// so every SRV target and PTR answer resolves.
		label := cmp.Or(e.host, DashedIP(e.ip))
		epName := label + "." + name
		b.addr(name, e.ip)
		b.addr(epName, e.ip)
		b.ptr(e.ip, epName)
		for _, p := range e.ports {
			b.srv(srvName(p.name, p.proto, name), epName, p.port)
		}
	}
}

func srvName(port string, proto corev1.Protocol, svc string) string {
	return "_" + strings.ToLower(port) + "._" + strings.ToLower(cmp.Or(string(proto), "tcp")) + "." + svc
}

func (b *builder) pods(pods []*corev1.Pod) {
	ix := b.ix
	ambiguous := map[netip.Addr]bool{}
	for _, p := range pods {
		if p == nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || !isLabel(p.Namespace) {
			continue // a finished pod's IP may already belong to another pod
		}
		ips := make([]string, 0, len(p.Status.PodIPs)+1)
		for _, pip := range p.Status.PodIPs {
			ips = append(ips, pip.IP)
		}
		if len(ips) == 0 && p.Status.PodIP != "" {
			ips = append(ips, p.Status.PodIP)
		}
		for _, s := range ips {
			ip, err := netip.ParseAddr(s)
			if err != nil || ip.Zone() != "" {
				continue
			}
			ip = ip.Unmap()
			if ix.pods == PodsVerified {
				m := ix.podIPs[p.Namespace]
				if m == nil {
					m = map[netip.Addr]struct{}{}
					ix.podIPs[p.Namespace] = m
				}
				m[ip] = struct{}{}
			}
			if !usesClusterSearch(p) {
				continue
			}
			if ns, ok := ix.clientNS[ip]; ok && ns != p.Namespace {
				ambiguous[ip] = true
			}
			ix.clientNS[ip] = p.Namespace
		}
	}
	for ip := range ambiguous {
		delete(ix.clientNS, ip)
	}
}

// usesClusterSearch reports whether kubelet gives the pod exactly the
// cluster search path (<ns>.svc, svc, zone, then the node's), which is
// what autopath assumes. Host-network pods share the node's IP, so their
// address says nothing about their namespace.
func usesClusterSearch(p *corev1.Pod) bool {
	if p.Spec.HostNetwork {
		return false
	}
	if p.Spec.DNSPolicy != "" && p.Spec.DNSPolicy != corev1.DNSClusterFirst {
		return false
	}
	return p.Spec.DNSConfig == nil || len(p.Spec.DNSConfig.Searches) == 0
}

// emptyNonTerminals makes every ancestor of a name in the zone exist, so a
// question for _tcp.<svc>.<ns>.svc.<zone> gets NODATA (RFC 8020: NXDOMAIN
// would tell caches that the SRV names below are gone too).
func (b *builder) emptyNonTerminals() {
	ix := b.ix
	var names []string
	for name := range ix.nodes {
		if name != ix.zone && strings.HasSuffix(name, "."+ix.zone) {
			names = append(names, name)
		}
	}
	for _, name := range names {
		for _, rest := firstLabel(name); rest != ix.zone && strings.HasSuffix(rest, ix.zone); _, rest = firstLabel(rest) {
			if _, ok := ix.nodes[rest]; ok {
				break // its ancestors were added with it
			}
			ix.nodes[rest] = &Node{}
		}
	}
}

// srvWeights spreads load evenly over the targets of each SRV name, the
// way CoreDNS does, so clients that honour weights pick targets uniformly.
func (b *builder) srvWeights() {
	for _, n := range b.ix.nodes {
		rrs := n.RRs(dns.TypeSRV)
		if len(rrs) < 2 {
			continue
		}
		w := uint16(max(1, 100/len(rrs)))
		for _, rr := range rrs {
			rr.(*dns.SRV).Weight = w
		}
	}
}

func newSOA(owner, zone string, ttl, serial uint32) *dns.SOA {
	return &dns.SOA{
		Hdr:     hdr(owner, dns.TypeSOA, ttl),
		Ns:      "ns.dns." + zone,
		Mbox:    "hostmaster." + zone,
		Serial:  cmp.Or(serial, 1),
		Refresh: 7200,
		Retry:   1800,
		Expire:  86400,
		Minttl:  ttl,
	}
}

func isLabel(s string) bool {
	return len(validation.IsDNS1123Label(strings.ToLower(s))) == 0
}

func groupSlices(all []*discoveryv1.EndpointSlice) map[string][]*discoveryv1.EndpointSlice {
	by := map[string][]*discoveryv1.EndpointSlice{}
	for _, sl := range all {
		if sl == nil {
			continue
		}
		svc := sl.Labels[discoveryv1.LabelServiceName]
		if svc == "" {
			continue
		}
		k := sl.Namespace + "/" + svc
		by[k] = append(by[k], sl)
	}
	for _, l := range by {
		slices.SortFunc(l, func(a, b *discoveryv1.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
	}
	return by
}

func sortedServices(in []*corev1.Service) []*corev1.Service {
	out := make([]*corev1.Service, 0, len(in))
	for _, s := range in {
		if s != nil {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b *corev1.Service) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return out
}
