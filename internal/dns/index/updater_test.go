package index

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/svcnet/svcnet/internal/dns/dnstest"
)

// dump writes everything an index answers from, in a stable order.
func dump(ix *Index) string {
	var lines []string
	for name, n := range ix.nodes.All {
		lines = append(lines, name+" (exists)")
		for _, set := range n.rrsets {
			for i, rr := range set.rrs {
				lines = append(lines, fmt.Sprintf("%s %d %d %s", name, set.typ, i, rr.String()))
			}
		}
	}
	for k := range ix.podIPs.All {
		lines = append(lines, "pod "+k.ns+" "+k.ip.String())
	}
	for k := range ix.podNS.All {
		lines = append(lines, "podns "+k)
	}
	for ip, ns := range ix.clientNS.All {
		lines = append(lines, "client "+ip.String()+" "+ns)
	}
	slices.Sort(lines)
	return fmt.Sprintf("services %d synced %v soa %s\n%s", ix.services, ix.synced, ix.soa, strings.Join(lines, "\n"))
}

// randomCluster makes objects from small pools of names and addresses, so
// that random changes collide: Services sharing endpoint addresses (and
// so PTR names), pods of two namespaces on one address, Services turning
// headless and back.
type randomCluster struct {
	r        *rand.Rand
	services map[string]*corev1.Service
	slices   map[string][]*discoveryv1.EndpointSlice
	pods     map[string]*corev1.Pod
}

var namespaces = []string{"default", "kube-system", "team-a", "Bad_NS"}

func (c *randomCluster) pick(list []string) string { return list[c.r.IntN(len(list))] }

func (c *randomCluster) ip() string { return fmt.Sprintf("10.244.0.%d", c.r.IntN(6)) }

func (c *randomCluster) service(ns, name string) *corev1.Service {
	ports := []corev1.ServicePort{dnstest.Port("http", corev1.ProtocolTCP, 80)}
	if c.r.IntN(2) == 0 {
		ports = append(ports, dnstest.Port("dns", corev1.ProtocolUDP, 53))
	}
	switch c.r.IntN(5) {
	case 0:
		return dnstest.ExternalName(ns, name, c.pick([]string{"example.com", "db.default.svc.cluster.local", "bad..name"}))
	case 1, 2:
		return dnstest.Headless(ns, name, c.r.IntN(2) == 0, ports...)
	}
	return dnstest.Service(ns, name, []string{fmt.Sprintf("10.96.0.%d", c.r.IntN(8))}, ports...)
}

func (c *randomCluster) slice(ns, svc string, i int) *discoveryv1.EndpointSlice {
	var eps []dnstest.Endpoint
	for range c.r.IntN(4) {
		eps = append(eps, dnstest.Endpoint{IP: c.ip(), Hostname: c.pick([]string{"", "", "web-0", "web-1"}), NotReady: c.r.IntN(4) == 0})
	}
	ports := []discoveryv1.EndpointPort{dnstest.SlicePort("http", corev1.ProtocolTCP, 8080)}
	return dnstest.Slice(ns, svc, fmt.Sprintf("%s-%d", svc, i), discoveryv1.AddressTypeIPv4, ports, eps...)
}

func (c *randomCluster) pod(ns, name string) *corev1.Pod {
	p := dnstest.Pod(ns, name, c.ip())
	switch c.r.IntN(6) {
	case 0:
		p.Status.Phase = corev1.PodSucceeded
	case 1:
		p.Spec.DNSPolicy = corev1.DNSDefault
	case 2:
		p.Status.PodIPs, p.Status.PodIP = nil, ""
	}
	return p
}

func (c *randomCluster) all() ([]*corev1.Service, []*discoveryv1.EndpointSlice, []*corev1.Pod) {
	var svcs []*corev1.Service
	var sls []*discoveryv1.EndpointSlice
	var pods []*corev1.Pod
	for _, s := range c.services {
		svcs = append(svcs, s)
	}
	for _, l := range c.slices {
		sls = append(sls, l...)
	}
	for _, p := range c.pods {
		pods = append(pods, p)
	}
	return svcs, sls, pods
}

// TestUpdaterEqualsBuild applies random changes one object at a time and
// checks after each that the snapshot equals a Build of everything from
// scratch, and that snapshots already handed out never change.
func TestUpdaterEqualsBuild(t *testing.T) {
	for _, pods := range []PodsMode{PodsDisabled, PodsVerified} {
		t.Run(pods.String(), func(t *testing.T) {
			c := &randomCluster{r: rand.New(rand.NewPCG(1, uint64(pods))), services: map[string]*corev1.Service{},
				slices: map[string][]*discoveryv1.EndpointSlice{}, pods: map[string]*corev1.Pod{}}
			opts := Options{Pods: pods, TTL: 30}
			u := NewUpdater(opts)
			type kept struct {
				ix   *Index
				dump string
			}
			var old []kept
			for step := range 2000 {
				ns, name := c.pick(namespaces), c.pick([]string{"web", "db", "api", "cache"})
				key := ns + "/" + name
				switch op := c.r.IntN(10); {
				case op < 4:
					c.services[key] = c.service(ns, name)
				case op < 5:
					delete(c.services, key)
				case op < 8:
					var l []*discoveryv1.EndpointSlice
					for i := range c.r.IntN(3) {
						l = append(l, c.slice(ns, name, i))
					}
					c.slices[key] = l
				case op < 9:
					c.pods[key] = c.pod(ns, name)
				default:
					delete(c.pods, key)
				}
				u.SetService(ns, name, c.services[key], c.slices[key])
				u.SetPod(key, c.pods[key])
				if step%7 == 0 {
					ns := []netip.Addr{netip.MustParseAddr(fmt.Sprintf("10.96.0.%d", 10+c.r.IntN(2)))}
					u.SetNameservers(ns)
					opts.Nameservers = ns
				}
				serial := uint32(1 + step/3)
				got := u.Snapshot(serial)
				opts.Serial = serial
				svcs, sls, ps := c.all()
				want := Build(opts, svcs, sls, ps)
				if g, w := dump(got), dump(want); g != w {
					t.Fatalf("step %d: the updated zone differs from a fresh build:\n--- updated\n%s\n--- built\n%s", step, g, w)
				}
				if step%50 == 0 {
					old = append(old, kept{got, dump(got)})
				}
			}
			for i, k := range old {
				if dump(k.ix) != k.dump {
					t.Errorf("snapshot %d changed after it was published", i)
				}
			}
		})
	}
}
