package cluster

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"github.com/miekg/dns"

	"github.com/svcnet/svcnet/internal/dns/forward"
	"github.com/svcnet/svcnet/internal/dns/index"
	"github.com/svcnet/svcnet/internal/kubeclient"
)

// Options are the command line of `svcnet dns`; flag names follow
// CoreDNS's kubernetes and forward plugins where they have one.
type Options struct {
	Kubeconfig string
	// Listen is where DNS is served, UDP and TCP (host:port).
	Listen string
	Zone   string
	// Upstreams are host:port (or bare IPs, port 53) of the servers that
	// answer names outside the zone; empty means the nameservers of
	// ResolvConf.
	Upstreams []string
	// ResolvConf is read for upstreams (when Upstreams is empty) and for
	// the node's search list, which autopath must know.
	ResolvConf string
	Pods       string // disabled, insecure or verified
	TTL        int    // seconds
	// MetricsBindAddress serves /metrics, HealthBindAddress /healthz and
	// /readyz; "0" or "" turns either off, and the same address serves
	// both from one listener.
	MetricsBindAddress string
	HealthBindAddress  string
	// Profiling adds /debug/pprof to the metrics address. Off by default
	// (CoreDNS's pprof plugin is too): in a cluster the metrics address
	// is reachable from every pod, and a profile costs CPU on demand.
	Profiling bool
	QueryLog  bool
	// ServiceCIDRs and PodCIDRs are the cluster's ranges: PTR questions
	// inside them are answered from the zone, never forwarded.
	ServiceCIDRs []string
	PodCIDRs     []string
	Autopath     bool
	// Forward are stub domains, ZONE=SERVER[,SERVER]: names in ZONE go to
	// its servers instead of the upstreams (CoreDNS's forward plugin in a
	// server block of its own; kube-dns's stubDomains).
	Forward []string
	// ConfigMap, NAMESPACE/NAME, is read for kube-dns's keys stubDomains
	// and upstreamNameservers, followed without a restart; empty turns it
	// off.
	ConfigMap string
}

// Defaults are what `svcnet dns` runs with when a flag is not given. The
// HTTP endpoints default to loopback so that a DNS server started by hand
// exposes nothing; pods pass wildcard addresses for their probes.
func Defaults() Options {
	return Options{
		Listen:             ":53",
		Zone:               index.DefaultZone,
		ResolvConf:         "/etc/resolv.conf",
		Pods:               "disabled",
		TTL:                index.DefaultTTL,
		MetricsBindAddress: "127.0.0.1:9153",
		HealthBindAddress:  "127.0.0.1:8080",
		ConfigMap:          "kube-system/kube-dns",
	}
}

// config is Options checked and parsed.
type config struct {
	Options
	zone       string // canonical
	pods       index.PodsMode
	ttl        uint32
	upstreams  []string
	fromResolv bool // upstreams came from ResolvConf
	noUpstream bool // --upstream none
	hostSearch []string
	reverse    []netip.Prefix
	stubs      map[string][]string // --forward, zones canonical
	configMap  [2]string           // namespace, name; empty when off
}

// maxTTL is CoreDNS's cap: longer would keep clients on a removed
// Service's address for an hour or more.
const maxTTL = 3600

// parse checks every flag and says which one is wrong and why, before
// anything is started.
func (o Options) parse() (*config, error) {
	c := &config{Options: o}
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }

	if o.Kubeconfig == "" && !kubeclient.InPod() {
		bad("--kubeconfig is required outside a pod (in a pod, the ServiceAccount's token is the default)")
	}
	if err := checkHostPort(o.Listen, false); err != nil {
		bad("--listen %q: %v", o.Listen, err)
	}
	zone := index.Canonical(strings.TrimSpace(o.Zone))
	if _, ok := dns.IsDomainName(zone); !ok || zone == "." || strings.ContainsAny(zone, `\ `) {
		bad("--zone %q: not a domain name", o.Zone)
	}
	c.zone = zone
	pods, err := index.ParsePodsMode(o.Pods)
	if err != nil {
		bad("--pods: %v", err)
	}
	c.pods = pods
	if o.TTL < 1 || o.TTL > maxTTL {
		bad("--ttl %d: want 1 to %d seconds", o.TTL, maxTTL)
	}
	c.ttl = uint32(max(0, min(o.TTL, maxTTL)))
	for _, a := range []struct{ flag, addr string }{
		{"--metrics-bind-address", o.MetricsBindAddress},
		{"--health-bind-address", o.HealthBindAddress},
	} {
		if a.addr == "" || a.addr == "0" {
			continue
		}
		if err := checkHostPort(a.addr, false); err != nil {
			bad("%s %q: %v (use 0 to turn it off)", a.flag, a.addr, err)
		}
	}
	for _, f := range []struct {
		flag  string
		cidrs []string
	}{{"--service-cidr", o.ServiceCIDRs}, {"--pod-cidr", o.PodCIDRs}} {
		for _, s := range f.cidrs {
			p, err := netip.ParsePrefix(strings.TrimSpace(s))
			if err != nil {
				bad("%s %q: not a CIDR", f.flag, s)
				continue
			}
			c.reverse = append(c.reverse, p.Masked())
		}
	}

	// "none": no forwarding at all, for a cluster with no route out;
	// outside names are refused.
	noUpstream := len(o.Upstreams) == 1 && o.Upstreams[0] == "none"
	c.noUpstream = noUpstream
	for _, u := range o.Upstreams {
		if noUpstream {
			break
		}
		hp, err := upstreamAddr(u)
		if err != nil {
			bad("--upstream %q: %v", u, err)
			continue
		}
		c.upstreams = append(c.upstreams, hp)
	}
	// resolv.conf gives the upstreams when none are named, and always the
	// node's search list, which autopath walks after the cluster's. A
	// missing file is fine when it is not needed for upstreams.
	if o.ResolvConf != "" {
		rc, err := dns.ClientConfigFromFile(o.ResolvConf)
		switch {
		case err != nil && noUpstream:
		case err != nil && (len(o.Upstreams) == 0 || !errors.Is(err, os.ErrNotExist)):
			bad("--resolv-conf: %v", err)
		case err != nil:
		default:
			c.hostSearch = rc.Search
			if len(o.Upstreams) > 0 {
				break
			}
			c.fromResolv = true
			for _, s := range rc.Servers {
				hp, err := upstreamAddr(net.JoinHostPort(s, rc.Port))
				if err != nil {
					bad("--resolv-conf %s: nameserver %q: %v", o.ResolvConf, s, err)
					continue
				}
				c.upstreams = append(c.upstreams, hp)
			}
			if len(rc.Servers) == 0 {
				bad("no upstream DNS server: --upstream not given and %s has no nameserver line", o.ResolvConf)
			}
		}
	} else if len(o.Upstreams) == 0 {
		bad("no upstream DNS server: give --upstream or --resolv-conf")
	}
	stubs, err := parseStubs(o.Forward, zone)
	if err != nil {
		bad("--forward %v", err)
	}
	c.stubs = stubs
	// Forwarding to ourselves would turn every outside question into a
	// loop that ends only at the timeout.
	for _, u := range c.upstreams {
		if sameAddr(u, o.Listen) {
			bad("upstream %s is this server's own --listen address", u)
		}
	}
	for z, servers := range c.stubs {
		for _, u := range servers {
			if sameAddr(u, o.Listen) {
				bad("--forward %s: %s is this server's own --listen address", z, u)
			}
		}
	}
	if o.ConfigMap != "" {
		ns, name, ok := strings.Cut(o.ConfigMap, "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			bad("--configmap %q: want NAMESPACE/NAME, or empty to read none", o.ConfigMap)
		}
		c.configMap = [2]string{ns, name}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return c, nil
}

// checkHostPort accepts host:port with a numeric port (0 allowed only
// where a random port makes sense) and an IP or empty host.
func checkHostPort(s string, needHost bool) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return errors.New("want ADDRESS:PORT")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("port %q is not a number from 0 to 65535", port)
	}
	if host == "" {
		if needHost {
			return errors.New("an IP address is needed")
		}
		return nil
	}
	if _, err := netip.ParseAddr(host); err != nil {
		return fmt.Errorf("%q is not an IP address", host)
	}
	return nil
}

// upstreamAddr normalizes an upstream to ip:port. Names are refused: to
// resolve them we would need the DNS we are forwarding for.
func upstreamAddr(s string) (string, error) {
	s = strings.TrimSpace(s)
	if ip, err := netip.ParseAddr(s); err == nil {
		return net.JoinHostPort(ip.String(), "53"), nil
	}
	if err := checkHostPort(s, true); err != nil {
		return "", fmt.Errorf("%v (want IP or IP:PORT)", err)
	}
	host, port, _ := net.SplitHostPort(s)
	if port == "0" {
		return "", errors.New("port 0 is not a server's port")
	}
	ip, _ := netip.ParseAddr(host)
	if ip.Zone() != "" {
		return net.JoinHostPort(ip.String(), port), nil
	}
	return net.JoinHostPort(ip.Unmap().String(), port), nil
}

// parseStubs reads ZONE=SERVER[,SERVER] stub domains. A zone inside the
// cluster's never reaches the forwarder and is refused, as is one given
// twice.
func parseStubs(flags []string, clusterZone string) (map[string][]string, error) {
	stubs := map[string][]string{}
	for _, f := range flags {
		z, list, ok := strings.Cut(f, "=")
		if !ok {
			return nil, fmt.Errorf("%q: want ZONE=SERVER[,SERVER]", f)
		}
		var servers []string
		for _, s := range strings.Split(list, ",") {
			hp, err := upstreamAddr(s)
			if err != nil {
				return nil, fmt.Errorf("%q: server %q: %v", f, s, err)
			}
			servers = append(servers, hp)
		}
		if err := addStub(stubs, z, servers, clusterZone); err != nil {
			return nil, fmt.Errorf("%q: %v", f, err)
		}
	}
	return stubs, nil
}

// addStub adds zone's servers to stubs, refusing what cannot work.
func addStub(stubs map[string][]string, zone string, servers []string, clusterZone string) error {
	z, err := forward.CanonicalZone(zone)
	if err != nil {
		return err
	}
	if dns.IsSubDomain(clusterZone, z) {
		return fmt.Errorf("zone %s is inside the cluster zone %s, which is answered here", z, clusterZone)
	}
	if _, dup := stubs[z]; dup {
		return fmt.Errorf("zone %s given twice", z)
	}
	if len(servers) == 0 {
		return fmt.Errorf("zone %s has no server", z)
	}
	stubs[z] = servers
	return nil
}

func sameAddr(upstream, listen string) bool {
	uh, up, err1 := net.SplitHostPort(upstream)
	lh, lp, err2 := net.SplitHostPort(listen)
	if err1 != nil || err2 != nil || up != lp {
		return false
	}
	u, err := netip.ParseAddr(uh)
	if err != nil {
		return false
	}
	if lh == "" {
		return u.IsLoopback() || u.IsUnspecified()
	}
	l, err := netip.ParseAddr(lh)
	return err == nil && (l == u || (l.IsUnspecified() && u.IsLoopback()))
}
