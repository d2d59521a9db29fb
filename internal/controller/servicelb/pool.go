package servicelb

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// Pool hands out load-balancer addresses from configured ranges. The
// local cluster's edge load balancer (a host on the underlay) watches the
// Services' status and balances each address:port over the nodes'
// NodePorts; the pool only decides the addresses.
type Pool struct {
	mu     sync.Mutex
	ranges []ipRange
	used   map[netip.Addr]string // address -> service key
	bySvc  map[string]netip.Addr
}

type ipRange struct{ first, last netip.Addr }

// ParsePool reads "10.0.0.100-10.0.0.150,192.168.5.0/28".
func ParsePool(spec string) (*Pool, error) {
	p := &Pool{used: map[netip.Addr]string{}, bySvc: map[string]netip.Addr{}}
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if strings.Contains(part, "/") {
			pfx, err := netip.ParsePrefix(part)
			if err != nil {
				return nil, fmt.Errorf("load-balancer pool %q: %w", part, err)
			}
			pfx = pfx.Masked()
			first, last := pfx.Addr(), lastOf(pfx)
			if pfx.Addr().Is4() && pfx.Bits() < 31 {
				first, last = first.Next(), last.Prev() // no network or broadcast address
			}
			p.ranges = append(p.ranges, ipRange{first, last})
			continue
		}
		a, b, ok := strings.Cut(part, "-")
		first, err1 := netip.ParseAddr(strings.TrimSpace(a))
		last := first
		var err2 error
		if ok {
			last, err2 = netip.ParseAddr(strings.TrimSpace(b))
		}
		if err1 != nil || err2 != nil || first.Is4() != last.Is4() || last.Less(first) {
			return nil, fmt.Errorf("load-balancer pool %q: want FIRST-LAST or a CIDR", part)
		}
		p.ranges = append(p.ranges, ipRange{first, last})
	}
	if len(p.ranges) == 0 {
		return nil, fmt.Errorf("load-balancer pool %q is empty", spec)
	}
	return p, nil
}

func lastOf(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 1 << (7 - i%8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

func (p *Pool) contains(a netip.Addr) bool {
	for _, r := range p.ranges {
		if !a.Less(r.first) && !r.last.Less(a) {
			return true
		}
	}
	return false
}

// Name implements Provider.
func (p *Pool) Name() string { return "pool" }

func key(svc *corev1.Service) string { return svc.Namespace + "/" + svc.Name }

// Restore marks the address svc already has as used.
func (p *Pool) Restore(svc *corev1.Service) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		if a, err := netip.ParseAddr(ing.IP); err == nil && p.contains(a) {
			if _, taken := p.used[a]; !taken {
				p.used[a] = key(svc)
				p.bySvc[key(svc)] = a
			}
		}
	}
}

// Ensure implements Provider: the address svc has, else the one it
// requests (spec.loadBalancerIP), else the first free one.
func (p *Pool) Ensure(_ context.Context, svc *corev1.Service, _ []*corev1.Node) ([]corev1.LoadBalancerIngress, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := key(svc)
	want := svc.Spec.LoadBalancerIP
	if a, ok := p.bySvc[k]; ok && (want == "" || want == a.String()) {
		return ingress(a), nil
	}
	if a, ok := p.bySvc[k]; ok {
		delete(p.used, a) // the request changed
		delete(p.bySvc, k)
	}
	if want != "" {
		a, err := netip.ParseAddr(want)
		switch {
		case err != nil:
			return nil, fmt.Errorf("requested load-balancer IP %q is not an IP address", want)
		case !p.contains(a):
			return nil, fmt.Errorf("requested load-balancer IP %s is not in the pool %s", a, p)
		case p.used[a] != "":
			return nil, fmt.Errorf("requested load-balancer IP %s is already used by %s", a, p.used[a])
		}
		p.used[a], p.bySvc[k] = k, a
		return ingress(a), nil
	}
	for _, r := range p.ranges {
		for a := r.first; !r.last.Less(a); a = a.Next() {
			if _, taken := p.used[a]; !taken {
				p.used[a], p.bySvc[k] = k, a
				return ingress(a), nil
			}
			if a == r.last {
				break
			}
		}
	}
	return nil, fmt.Errorf("no free address in the load-balancer pool %s", p)
}

// Delete implements Provider.
func (p *Pool) Delete(_ context.Context, svc *corev1.Service) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if a, ok := p.bySvc[key(svc)]; ok {
		delete(p.used, a)
		delete(p.bySvc, key(svc))
	}
	return nil
}

func (p *Pool) String() string {
	parts := make([]string, len(p.ranges))
	for i, r := range p.ranges {
		parts[i] = r.first.String() + "-" + r.last.String()
	}
	return strings.Join(parts, ",")
}

func ingress(a netip.Addr) []corev1.LoadBalancerIngress {
	return []corev1.LoadBalancerIngress{{IP: a.String(), IPMode: ptrTo(corev1.LoadBalancerIPModeVIP)}}
}

func ptrTo[T any](v T) *T { return &v }
