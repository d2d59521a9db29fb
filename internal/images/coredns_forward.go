package images

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// The forward plugin of /coredns: `forward FROM TO…` sends the queries
// for names under FROM to the upstreams TO, plain DNS over the
// transport the query came by (UDP, or TCP), and returns the first
// upstream's reply as it is. The upstreams are tried in turn, each for
// a short while; when none answers, the reply is SERVFAIL and the
// error goes to the errors plugin. An upstream the node cannot reach
// (no route: 8.8.8.8 from a pod of svcnet's clusters) fails at once.
// CoreDNS's options block, DNS over TLS and its health checks are not
// served.

// corednsForwardTry is how long an upstream has to answer (CoreDNS's
// forward gives it 2 s too, to begin with).
const corednsForwardTry = 2 * time.Second

// corednsForwardBudget bounds a query's tries together, as CoreDNS's
// forward does.
const corednsForwardBudget = 5 * time.Second

// corednsMaxUpstreams is CoreDNS's limit on a forward's upstreams.
const corednsMaxUpstreams = 15

// corednsForward is the forward plugin of a block.
type corednsForward struct {
	from string   // fully qualified, lower case
	to   []string // IP:PORT
}

// parseCorednsForward reads `forward FROM TO…`.
func parseCorednsForward(args []string, opts [][]string, readFile func(string) ([]byte, error)) (*corednsForward, error) {
	if len(args) < 2 {
		return nil, fmt.Errorf("forward %q: want FROM TO…", strings.Join(args, " "))
	}
	if opts != nil {
		return nil, errors.New("forward: an options block is not served (forward FROM TO… is)")
	}
	from := strings.TrimPrefix(args[0], "dns://")
	f := &corednsForward{from: strings.ToLower(dns.Fqdn(from))}
	for _, to := range args[1:] {
		ups, err := corednsUpstreams(to, readFile)
		if err != nil {
			return nil, fmt.Errorf("forward: %w", err)
		}
		f.to = append(f.to, ups...)
	}
	if len(f.to) == 0 {
		return nil, errors.New("forward: no upstream")
	}
	if len(f.to) > corednsMaxUpstreams {
		return nil, fmt.Errorf("forward: %d upstreams, more than %d", len(f.to), corednsMaxUpstreams)
	}
	return f, nil
}

// corednsUpstreams are the addresses one TO names: IP, IP:PORT (with
// dns:// or not; port 53 by default), or a resolv.conf file whose
// nameservers are the upstreams.
func corednsUpstreams(to string, readFile func(string) ([]byte, error)) ([]string, error) {
	if scheme, rest, ok := strings.Cut(to, "://"); ok {
		if scheme != "dns" {
			return nil, fmt.Errorf("upstream %q: only plain DNS (dns:// or no scheme) is served", to)
		}
		to = rest
	}
	if ip, err := netip.ParseAddr(to); err == nil {
		return []string{net.JoinHostPort(ip.Unmap().String(), "53")}, nil
	}
	if host, port, err := net.SplitHostPort(to); err == nil {
		ip, err := netip.ParseAddr(host)
		if err != nil {
			return nil, fmt.Errorf("upstream %q: %q is not an IP address", to, host)
		}
		if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			return nil, fmt.Errorf("upstream %q: bad port", to)
		}
		return []string{net.JoinHostPort(ip.Unmap().String(), port)}, nil
	}
	if !strings.Contains(to, "/") {
		return nil, fmt.Errorf("upstream %q: want IP[:PORT] or a resolv.conf file", to)
	}
	data, err := readFile(to)
	if err != nil {
		return nil, fmt.Errorf("upstream %q: %w", to, err)
	}
	var ups []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "nameserver" {
			continue
		}
		if ip, err := netip.ParseAddr(f[1]); err == nil {
			ups = append(ups, net.JoinHostPort(ip.Unmap().String(), "53"))
		}
	}
	if len(ups) == 0 {
		return nil, fmt.Errorf("upstream %q: no nameserver in the file", to)
	}
	return ups, nil
}

// exchange sends q to the upstreams in turn over proto ("udp", "tcp"),
// each given try to answer, and returns the first reply to q's
// question; the error says how each upstream failed when none answered.
func (f *corednsForward) exchange(ctx context.Context, q *dns.Msg, proto string, try time.Duration) (*dns.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, corednsForwardBudget)
	defer cancel()
	var failed []string
	for _, up := range f.to {
		if ctx.Err() != nil {
			failed = append(failed, up+": not tried: "+ctx.Err().Error())
			continue
		}
		c := &dns.Client{Net: proto, Timeout: try}
		r, _, err := c.ExchangeContext(ctx, q.Copy(), up)
		if err == nil && (len(r.Question) != 1 || !strings.EqualFold(r.Question[0].Name, q.Question[0].Name) ||
			r.Question[0].Qtype != q.Question[0].Qtype) {
			err = fmt.Errorf("%s answered another question", up)
		}
		if err == nil {
			return r, nil
		}
		failed = append(failed, err.Error())
	}
	return nil, fmt.Errorf("forward: no upstream answered: %s", strings.Join(failed, "; "))
}
