// Package nodecache is `svcnet node-cache`: a DNS cache in each node's
// network namespace, Kubernetes' NodeLocal DNSCache idea. Pods' resolv.conf
// names its link-local address (169.254.20.10 by default); it answers from
// its cache and asks the cluster DNS's replicas over TCP, directly at
// their endpoints, so that:
//
//   - pods' UDP queries never enter conntrack (NOTRACK rules) and never
//     race the proxy's DNAT;
//   - a replica that died refuses the TCP connection at once and the
//     question goes to the next replica, instead of the pod's query timing
//     out or failing until every proxy has dropped the dead endpoint;
//   - repeated questions are answered on the node.
//
// Every question goes to the cluster DNS, which forwards outside names by
// its own rules (NodeLocal DNSCache sends those to the node's resolv.conf;
// keeping one forwarding policy, in one place, is deliberate).
package nodecache

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/svcstate"
)

// DefaultAddress is NodeLocal DNSCache's link-local address.
const DefaultAddress = "169.254.20.10"

// Options are the command line of `svcnet node-cache`.
type Options struct {
	Kubeconfig string
	// Listen is where pods' queries arrive, UDP and TCP.
	Listen string
	// Service is the cluster DNS Service (namespace/name) whose endpoints
	// are asked.
	Service string
	// ClusterDNS is the Service's ClusterIP, asked through the proxy's
	// rules until the endpoints are known and whenever none is usable.
	ClusterDNS string
	// SetupAddress puts Listen's address on the namespace's loopback and
	// adds the NOTRACK rules for it.
	SetupAddress   bool
	IPTablesBinary string
	// Timeout bounds one question to one replica: a cluster DNS answers
	// in a millisecond, so a second of silence means it is gone.
	Timeout            time.Duration
	MetricsBindAddress string
	QueryLog           bool
}

// Defaults are NodeLocal DNSCache's address and metrics port.
func Defaults() Options {
	return Options{
		Listen:             net.JoinHostPort(DefaultAddress, "53"),
		Service:            "kube-system/kube-dns",
		SetupAddress:       true,
		IPTablesBinary:     "iptables",
		Timeout:            time.Second,
		MetricsBindAddress: "127.0.0.1:9253",
	}
}

// config is Options checked.
type config struct {
	Options
	addr      netip.Addr
	port      uint16
	namespace string
	name      string
	fallback  string // ClusterDNS:53
}

func (o Options) parse() (*config, error) {
	c := &config{Options: o}
	var errs []string
	bad := func(format string, a ...any) { errs = append(errs, fmt.Sprintf(format, a...)) }
	if o.Kubeconfig == "" {
		bad("--kubeconfig is required")
	}
	if ap, err := netip.ParseAddrPort(o.Listen); err != nil || ap.Port() == 0 || ap.Addr().IsUnspecified() {
		bad("--listen %q: want IP:PORT of one address (the address pods' resolv.conf names)", o.Listen)
	} else {
		c.addr, c.port = ap.Addr(), ap.Port()
	}
	ns, name, ok := strings.Cut(o.Service, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		bad("--service %q: want NAMESPACE/NAME", o.Service)
	}
	c.namespace, c.name = ns, name
	if ip, err := netip.ParseAddr(o.ClusterDNS); err != nil {
		bad("--cluster-dns %q: want the cluster DNS Service's ClusterIP", o.ClusterDNS)
	} else {
		c.fallback = net.JoinHostPort(ip.String(), "53")
	}
	if o.Timeout <= 0 {
		bad("--upstream-timeout %s: want a positive duration", o.Timeout)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("svcnet node-cache: %s", strings.Join(errs, "; "))
	}
	return c, nil
}

// Upstreams are the addresses to ask for svc: the usable endpoints of its
// TCP port 53 (else its first TCP port), by the rule every proxy uses
// (ready, else serving and terminating), in a stable order; nil when it
// has none, and the caller falls back to the ClusterIP.
func Upstreams(svc *svcstate.Service) []string {
	if svc == nil {
		return nil
	}
	var port *svcstate.ServicePort
	for _, p := range svc.Ports {
		if p.Protocol != corev1.ProtocolTCP {
			continue
		}
		if port == nil || (p.Port == 53 && port.Port != 53) {
			port = p
		}
	}
	if port == nil {
		return nil
	}
	var out []string
	for _, e := range svcstate.Usable(svc.Endpoints(port.Name)) {
		out = append(out, e.String())
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// choose is what the forwarder should ask: the endpoints, or fallback.
func choose(eps []string, fallback string) []string {
	if len(eps) == 0 {
		return []string{fallback}
	}
	return eps
}
