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

	"github.com/svcnet/svcnet/internal/svcstate"
)

// Build makes the index for one snapshot of the cluster. It reads the
// objects and never keeps or changes them. Objects that cannot be named in
// DNS (bad labels, unparsable addresses) are skipped rather than failing
// the whole zone: one odd object must not take every name down.
//
// Input order does not matter; the records come out in a stable order, so
// the same snapshot always gives byte-identical answers. An Updater given the
// same objects one by one publishes the same index.
func Build(opts Options, services []*corev1.Service, endpointSlices []*discoveryv1.EndpointSlice, pods []*corev1.Pod) *Index {
	z := NewUpdater(opts)
	z.SetNameservers(opts.Nameservers)
	if !opts.NotSynced {
		bySvc := groupSlices(endpointSlices)
		for _, svc := range services {
			if svc != nil {
				z.SetService(svc.Namespace, svc.Name, svc, bySvc[svc.Namespace+"/"+svc.Name])
			}
		}
		for _, p := range pods {
			if p != nil {
				z.SetPod(p.Namespace+"/"+p.Name, p)
			}
		}
	}
	return z.Snapshot(opts.Serial)
}

type rrKey struct {
	owner string
	typ   uint16
	data  string
}

// record is a resource record and what tells it apart from others of its
// owner and type.
type record struct {
	rr   dns.RR
	data string
}

// contribution is what one source — the zone's apex, or one Service —
// puts in the zone: its records by owner, in the order they were made,
// and every name it makes exist (owners, names without data, and their
// ancestors inside the zone).
type contribution struct {
	owners  []string
	records map[string][]record
	names   map[string]struct{}
	// service counts the Service for Index.Services (0 for the apex and
	// Services that cannot be named).
	service int
}

// builder makes one contribution.
type builder struct {
	zone string
	ttl  uint32
	c    *contribution
	seen map[rrKey]struct{}
	// srvs counts the SRV records made per owner, duplicates included:
	// CoreDNS spreads the weight over those (two ports of one number
	// give one record of weight 50).
	srvs map[string]int
}

func newBuilder(zone string, ttl uint32) *builder {
	return &builder{zone: zone, ttl: ttl,
		c:    &contribution{records: map[string][]record{}, names: map[string]struct{}{}},
		seen: map[rrKey]struct{}{}, srvs: map[string]int{}}
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
	b.node(h.Name)
	if _, ok := b.c.records[h.Name]; !ok {
		b.c.owners = append(b.c.owners, h.Name)
	}
	b.c.records[h.Name] = append(b.c.records[h.Name], record{rr, data})
}

// node makes name exist, with or without records.
func (b *builder) node(name string) { b.c.names[name] = struct{}{} }

func (b *builder) addr(owner string, ip netip.Addr) {
	b.add(newAddr(owner, b.ttl, ip), ip.String())
}

func (b *builder) ptr(ip netip.Addr, target string) {
	owner := ReverseName(ip)
	b.add(&dns.PTR{Hdr: hdr(owner, dns.TypePTR, b.ttl), Ptr: target}, target)
}

func (b *builder) srv(owner, target string, port uint16) {
	rr := &dns.SRV{Hdr: hdr(owner, dns.TypeSRV, b.ttl), Priority: 0, Weight: 100, Port: port, Target: target}
	b.srvs[owner]++
	b.add(rr, strconv.Itoa(int(port))+" "+target)
}

// done finishes the contribution: the empty non-terminals above its
// names (RFC 8020: a question for _tcp.<svc>.<ns>.svc.<zone> gets NODATA,
// as NXDOMAIN would tell caches that the SRV names below are gone too),
// and the SRV weights, spread evenly over the targets of each SRV name as
// CoreDNS does, so clients that honour weights pick targets uniformly.
// Every SRV name belongs to one Service, so its contribution knows them
// all.
func (b *builder) done() *contribution {
	var names []string
	for name := range b.c.names {
		if name != b.zone && strings.HasSuffix(name, "."+b.zone) {
			names = append(names, name)
		}
	}
	for _, name := range names {
		for _, rest := firstLabel(name); rest != b.zone && strings.HasSuffix(rest, b.zone); _, rest = firstLabel(rest) {
			if _, ok := b.c.names[rest]; ok {
				break // its ancestors were added with it
			}
			b.c.names[rest] = struct{}{}
		}
	}
	for owner, n := range b.srvs {
		if n < 2 {
			continue
		}
		w := uint16(max(1, 100/n))
		for _, r := range b.c.records[owner] {
			if srv, ok := r.rr.(*dns.SRV); ok {
				srv.Weight = w
			}
		}
	}
	return b.c
}

// apex is the zone's own contribution: SOA, NS and its target's
// addresses, the schema version, and the svc and pod subtrees.
func apex(zone string, ttl uint32, pods PodsMode, soa *dns.SOA, nameservers []netip.Addr) *contribution {
	b := newBuilder(zone, ttl)
	b.add(soa, "")
	ns := "ns.dns." + zone
	b.add(&dns.NS{Hdr: hdr(zone, dns.TypeNS, ttl), Ns: ns}, ns)
	b.node(ns)
	for _, ip := range nameservers {
		if ip.IsValid() {
			b.addr(ns, ip.Unmap())
		}
	}
	v := "dns-version." + zone
	b.add(&dns.TXT{Hdr: hdr(v, dns.TypeTXT, ttl), Txt: []string{SchemaVersion}}, SchemaVersion)
	b.node("svc." + zone)
	if pods != PodsDisabled {
		b.node("pod." + zone)
	}
	return b.done()
}

// service is the contribution of one Service with its EndpointSlices.
func service(zone string, ttl uint32, svc *corev1.Service, svcSlices []*discoveryv1.EndpointSlice) *contribution {
	b := newBuilder(zone, ttl)
	b.service(svc, svcSlices)
	return b.done()
}

func (b *builder) service(svc *corev1.Service, svcSlices []*discoveryv1.EndpointSlice) {
	if !isLabel(svc.Name) || !isLabel(svc.Namespace) {
		return
	}
	b.c.service = 1
	b.node(svc.Namespace + ".svc." + b.zone)
	name := svc.Name + "." + svc.Namespace + ".svc." + b.zone

	switch {
	case svc.Spec.Type == corev1.ServiceTypeExternalName:
		// The CNAME is the only record: a CNAME owner can have no other
		// data (RFC 1034 3.6.2), so no SRV records either.
		target := Canonical(strings.TrimSpace(svc.Spec.ExternalName))
		if _, ok := dns.IsDomainName(target); !ok || target == "." || len(target) > 255 {
			b.node(name)
			return
		}
		b.add(&dns.CNAME{Hdr: hdr(name, dns.TypeCNAME, b.ttl), Target: target}, target)

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
		var addrs []netip.Addr
		for _, s := range ips {
			ip, err := netip.ParseAddr(s)
			if err != nil || ip.Zone() != "" {
				continue
			}
			ip = ip.Unmap()
			addrs = append(addrs, ip)
			b.addr(name, ip)
			b.ptr(ip, name)
		}
		for _, p := range svc.Spec.Ports {
			if p.Port <= 0 || p.Port > 65535 {
				continue
			}
			// As CoreDNS: the Service's name has an SRV record for each
			// port, named or not.
			b.srv(name, name, uint16(p.Port))
			if p.Name == "" || !isLabel(p.Name) {
				continue
			}
			owner := srvName(p.Name, p.Protocol, name)
			b.srv(owner, name, uint16(p.Port))
			// CoreDNS answers address questions at the SRV names too.
			for _, ip := range addrs {
				b.addr(owner, ip)
			}
		}
		// CoreDNS names the ready endpoints of every Service, not only
		// headless ones, and answers their PTR questions with those
		// names: <hostname or dashed address>.<service>. The Service's
		// own name keeps its ClusterIP.
		for _, e := range endpoints(svc, svcSlices) {
			epName := cmp.Or(e.host, DashedIP(e.ip)) + "." + name
			b.addr(epName, e.ip)
			b.ptr(e.ip, epName)
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

// endpoints are the Service's endpoints that DNS publishes (ready ones,
// or all with publishNotReadyAddresses), by address, in address order,
// each with its hostname and ports. The slices are read by svcstate's
// rules, as every proxy mode reads them: the same endpoints, addresses
// and readiness (FQDN slices carry no address and are left out). What
// is DNS's own: a port's name and an endpoint's hostname are used only
// when they are DNS labels.
func endpoints(svc *corev1.Service, svcSlices []*discoveryv1.EndpointSlice) []*endpoint {
	byIP := map[netip.Addr]*endpoint{}
	for _, sl := range svcSlices {
		slicePorts, eps, ok := svcstate.ReadSlice(sl, nil)
		if !ok {
			continue
		}
		ports := make([]port, 0, len(slicePorts))
		for _, p := range slicePorts {
			pt := port{proto: p.Protocol, port: uint16(p.Port)}
			if isLabel(p.Name) {
				pt.name = p.Name
			}
			ports = append(ports, pt)
		}
		for _, ep := range eps {
			if !ep.Ready && !svc.Spec.PublishNotReadyAddresses {
				continue
			}
			host := ""
			if isLabel(ep.Hostname) {
				host = strings.ToLower(ep.Hostname)
			}
			e := byIP[ep.IP]
			if e == nil {
				e = &endpoint{ip: ep.IP}
				byIP[ep.IP] = e
			}
			if e.host == "" {
				e.host = host
			}
			e.ports = append(e.ports, ports...)
		}
	}
	eps := make([]*endpoint, 0, len(byIP))
	for _, e := range byIP {
		eps = append(eps, e)
	}
	slices.SortFunc(eps, func(a, b *endpoint) int { return a.ip.Compare(b.ip) })
	return eps
}

// headless publishes the endpoints themselves. With no endpoint to publish
// the Service name does not exist (the specification asks for NXDOMAIN).
func (b *builder) headless(svc *corev1.Service, name string, svcSlices []*discoveryv1.EndpointSlice) {
	for _, e := range endpoints(svc, svcSlices) {
		// The endpoint's own name: its hostname, else its dashed address,
		// so every SRV target and PTR answer resolves.
		label := cmp.Or(e.host, DashedIP(e.ip))
		epName := label + "." + name
		b.addr(name, e.ip)
		b.addr(epName, e.ip)
		b.ptr(e.ip, epName)
		for _, p := range e.ports {
			// As CoreDNS: an SRV record at the Service's name for every
			// endpoint and port, and address records at the SRV names.
			b.srv(name, epName, p.port)
			if p.name == "" {
				continue
			}
			owner := srvName(p.name, p.proto, name)
			b.srv(owner, epName, p.port)
			b.addr(owner, e.ip)
		}
	}
}

func srvName(port string, proto corev1.Protocol, svc string) string {
	return "_" + strings.ToLower(port) + "._" + strings.ToLower(cmp.Or(string(proto), "tcp")) + "." + svc
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
