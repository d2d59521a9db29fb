package images

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/miekg/dns"
)

// The agnhost image carries CoreDNS at /coredns, which Kubernetes' DNS
// tests start as a small DNS server of their own from a Corefile in a
// ConfigMap ("should support configurable pod resolv.conf"). svcnet's
// /coredns serves what those Corefiles use, as CoreDNS does: server
// blocks for zones ("." or "example.org", ":PORT" after them, 53 by
// default), the hosts plugin with its entries inline or from a file
// (fallthrough, ttl, no_reverse; reload is accepted and ignored: the
// file is read once), and log. Any other plugin is refused at start with
// an error naming it, never ignored.

// corednsBlock is one server block of a Corefile.
type corednsBlock struct {
	zones []string // fully qualified, lower case
	port  string
	hosts *corednsHosts
	log   bool
}

// corednsHosts is the hosts plugin of a block.
type corednsHosts struct {
	names       map[string][]netip.Addr // by lower-case FQDN
	reverse     map[string][]string     // PTR names by lower-case reverse FQDN
	ttl         uint32
	fallThrough bool
}

func (h *corednsHosts) add(ip netip.Addr, names []string, reverse bool) {
	for _, n := range names {
		n = strings.ToLower(dns.Fqdn(n))
		h.names[n] = append(h.names[n], ip)
		if reverse {
			r, _ := dns.ReverseAddr(ip.String())
			h.reverse[r] = append(h.reverse[r], n)
		}
	}
}

// parseHostsLine adds one line of a hosts file or of the plugin's block
// ("IP NAME…"); lines that are not entries are an error in a Corefile
// and skipped in a file, as CoreDNS does.
func parseHostsLine(fields []string) (netip.Addr, []string, error) {
	if len(fields) < 2 {
		return netip.Addr{}, nil, fmt.Errorf("hosts entry %q: want IP NAME…", strings.Join(fields, " "))
	}
	ip, err := netip.ParseAddr(fields[0])
	if err != nil {
		return netip.Addr{}, nil, fmt.Errorf("hosts entry %q: %w", strings.Join(fields, " "), err)
	}
	return ip.Unmap(), fields[1:], nil
}

// parseCorefile reads the subset of the Corefile syntax above: one
// directive per line, blocks in braces.
func parseCorefile(text string, readFile func(string) ([]byte, error)) ([]corednsBlock, error) {
	var lines [][]string
	for _, l := range strings.Split(text, "\n") {
		if i := strings.IndexByte(l, '#'); i >= 0 {
			l = l[:i]
		}
		// Braces are tokens of their own wherever they are written.
		l = strings.NewReplacer("{", " { ", "}", " } ").Replace(l)
		if f := strings.Fields(l); len(f) > 0 {
			lines = append(lines, f)
		}
	}
	var blocks []corednsBlock
	for i := 0; i < len(lines); i++ {
		head := lines[i]
		if head[len(head)-1] != "{" {
			return nil, fmt.Errorf("corefile: server block %q: want ZONE[:PORT]… {", strings.Join(head, " "))
		}
		b := corednsBlock{port: "53"}
		for _, key := range head[:len(head)-1] {
			zone, port, found := strings.Cut(strings.TrimPrefix(key, "dns://"), ":")
			if found {
				if _, err := strconv.ParseUint(port, 10, 16); err != nil {
					return nil, fmt.Errorf("corefile: server block key %q: bad port", key)
				}
				b.port = port
			}
			if zone == "" {
				zone = "."
			}
			b.zones = append(b.zones, strings.ToLower(dns.Fqdn(zone)))
		}
		for i++; ; i++ {
			if i >= len(lines) {
				return nil, errors.New("corefile: a server block is not closed")
			}
			l := lines[i]
			if l[0] == "}" {
				break
			}
			switch l[0] {
			case "log":
				b.log = true
			case "hosts":
				h := &corednsHosts{names: map[string][]netip.Addr{}, reverse: map[string][]string{}, ttl: 3600}
				reverse := true
				var entries [][]string
				if l[len(l)-1] == "{" {
					for i++; i < len(lines) && lines[i][0] != "}"; i++ {
						entries = append(entries, lines[i])
					}
					if i >= len(lines) {
						return nil, errors.New("corefile: the hosts block is not closed")
					}
				}
				for _, e := range entries {
					switch e[0] {
					case "fallthrough":
						h.fallThrough = true
					case "no_reverse":
						reverse = false
					case "reload":
					case "ttl":
						if len(e) != 2 {
							return nil, errors.New("corefile: hosts: ttl wants one value")
						}
						ttl, err := strconv.ParseUint(e[1], 10, 32)
						if err != nil {
							return nil, fmt.Errorf("corefile: hosts: ttl %q: %w", e[1], err)
						}
						h.ttl = uint32(ttl)
					}
				}
				for _, e := range entries {
					switch e[0] {
					case "fallthrough", "no_reverse", "reload", "ttl":
						continue
					}
					ip, names, err := parseHostsLine(e)
					if err != nil {
						return nil, fmt.Errorf("corefile: %w", err)
					}
					h.add(ip, names, reverse)
				}
				if args := l[1:]; len(args) > 0 && args[0] != "{" {
					data, err := readFile(args[0])
					if err != nil {
						return nil, fmt.Errorf("corefile: hosts file: %w", err)
					}
					sc := bufio.NewScanner(strings.NewReader(string(data)))
					for sc.Scan() {
						line := sc.Text()
						if j := strings.IndexByte(line, '#'); j >= 0 {
							line = line[:j]
						}
						if ip, names, err := parseHostsLine(strings.Fields(line)); err == nil {
							h.add(ip, names, reverse)
						}
					}
				}
				b.hosts = h
			default:
				return nil, fmt.Errorf("corefile: plugin %q is not served by svcnet's /coredns (hosts and log are)", l[0])
			}
		}
		blocks = append(blocks, b)
	}
	if len(blocks) == 0 {
		return nil, errors.New("corefile: no server block")
	}
	return blocks, nil
}

// answer is CoreDNS's reply to q from the blocks of one port: the block
// of the longest zone that holds the name, its hosts plugin, else
// REFUSED (no block for the name) or SERVFAIL (nothing answered).
func corednsAnswer(blocks []corednsBlock, q *dns.Msg) *dns.Msg {
	m := new(dns.Msg)
	if len(q.Question) != 1 {
		m.SetRcode(q, dns.RcodeFormatError)
		return m
	}
	qs := q.Question[0]
	name := strings.ToLower(qs.Name)
	var block *corednsBlock
	best := -1
	for i := range blocks {
		for _, z := range blocks[i].zones {
			if dns.IsSubDomain(z, name) && dns.CountLabel(z) > best {
				block, best = &blocks[i], dns.CountLabel(z)
			}
		}
	}
	if block == nil {
		m.SetRcode(q, dns.RcodeRefused)
		return m
	}
	m.SetReply(q)
	m.Authoritative = true
	if h := block.hosts; h != nil {
		hdr := dns.RR_Header{Name: qs.Name, Class: dns.ClassINET, Ttl: h.ttl}
		ips, known := h.names[name]
		ptrs, knownPTR := h.reverse[name]
		switch {
		case qs.Qtype == dns.TypePTR && knownPTR:
			for _, p := range ptrs {
				hdr.Rrtype = dns.TypePTR
				m.Answer = append(m.Answer, &dns.PTR{Hdr: hdr, Ptr: p})
			}
			return m
		case known:
			for _, ip := range ips {
				switch {
				case qs.Qtype == dns.TypeA && ip.Is4():
					hdr.Rrtype = dns.TypeA
					m.Answer = append(m.Answer, &dns.A{Hdr: hdr, A: ip.AsSlice()})
				case qs.Qtype == dns.TypeAAAA && ip.Is6():
					hdr.Rrtype = dns.TypeAAAA
					m.Answer = append(m.Answer, &dns.AAAA{Hdr: hdr, AAAA: ip.AsSlice()})
				}
			}
			return m // NODATA for the name's other types
		case !h.fallThrough:
			m.Rcode = dns.RcodeNameError
			return m
		}
	}
	m.Authoritative = false
	m.SetRcode(q, dns.RcodeServerFailure)
	return m
}

// agnhostCoreDNS is /coredns -conf FILE: it serves the Corefile's blocks
// on UDP and TCP until ctx ends.
func agnhostCoreDNS(ctx context.Context, env *agnhostEnv, args []string) error {
	fs := flag.NewFlagSet("coredns", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	conf := fs.String("conf", "Corefile", "Corefile to load")
	if err := fs.Parse(args); err != nil {
		return err
	}
	text, err := os.ReadFile(*conf)
	if err != nil {
		return fmt.Errorf("coredns: %w", err)
	}
	blocks, err := parseCorefile(string(text), os.ReadFile)
	if err != nil {
		return fmt.Errorf("coredns: %w", err)
	}
	byPort := map[string][]corednsBlock{}
	for _, b := range blocks {
		byPort[b.port] = append(byPort[b.port], b)
	}
	log := env.logger()
	var servers []*dns.Server
	for port, bs := range byPort {
		handler := dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
			m := corednsAnswer(bs, q)
			if len(q.Question) == 1 && logs(bs) {
				log.Printf("[INFO] %s - %d \"%s IN %s %s\" %s", w.RemoteAddr(), q.Id, dns.TypeToString[q.Question[0].Qtype],
					q.Question[0].Name, w.RemoteAddr().Network(), dns.RcodeToString[m.Rcode])
			}
			_ = w.WriteMsg(m)
		})
		pc, err := net.ListenPacket("udp", env.addr("", port))
		if err != nil {
			return fmt.Errorf("coredns: %w", err)
		}
		l, err := net.Listen("tcp", env.addr("", strconv.Itoa(pc.LocalAddr().(*net.UDPAddr).Port)))
		if err != nil {
			pc.Close()
			return fmt.Errorf("coredns: %w", err)
		}
		env.announce("dns-udp", pc.LocalAddr())
		env.announce("dns-tcp", l.Addr())
		servers = append(servers, &dns.Server{PacketConn: pc, Handler: handler}, &dns.Server{Listener: l, Handler: handler})
	}
	fmt.Fprintln(env.stdout, "CoreDNS-svcnet (hosts, log)")
	errs := make(chan error, len(servers))
	var wg sync.WaitGroup
	for _, s := range servers {
		wg.Add(1)
		go func() { defer wg.Done(); errs <- s.ActivateAndServe() }()
	}
	select {
	case <-ctx.Done():
		err = nil
	case err = <-errs:
	}
	for _, s := range servers {
		_ = s.Shutdown()
	}
	wg.Wait()
	return err
}

func logs(bs []corednsBlock) bool {
	for _, b := range bs {
		if b.log {
			return true
		}
	}
	return false
}
