package images

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log"
	"maps"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// /coredns is svcnet's stand-in for the CoreDNS binary. Two images carry
// it: agnhost, whose /coredns Kubernetes' DNS tests start as a small DNS
// server of their own from a Corefile in a ConfigMap ("should support
// configurable pod resolv.conf"), and registry.k8s.io/coredns/coredns,
// which the Gateway API conformance suite runs behind its UDPRoutes. It
// takes CoreDNS's command line (-conf, -dns.port/-p, -pidfile, -quiet,
// -plugins, -version) and serves what those Corefiles use, as CoreDNS
// does: server blocks for zones ("." or "example.org", ":PORT" after
// them, 53 or -dns.port by default) and these plugins:
//
//	hosts   entries inline or from a file (fallthrough, ttl, no_reverse;
//	        reload is accepted and ignored: the file is read once)
//	forward FROM TO…: plain DNS to the upstreams in turn (coredns_forward.go)
//	whoami  the client's address and port (coredns_whoami.go)
//	log     one line per query on stderr
//	errors  one line per failed query on stderr
//
// A query runs through its block's plugins in CoreDNS's order (hosts,
// forward, whoami), whatever their order in the Corefile. Any other
// plugin is refused at start with an error naming it, never ignored.

// runCoreDNS stands in for registry.k8s.io/coredns/coredns, whose
// entrypoint is /coredns: args are CoreDNS's command line, as the
// Gateway API conformance suite's manifest gives it (-conf
// /root/Corefile). It is agnhost's /coredns, the same program.
func runCoreDNS(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] != "/coredns" {
		args = append([]string{"/coredns"}, args...)
	}
	return runAgnhost(ctx, args)
}

// corednsDefaultPort is the port of the server blocks that name none,
// unless -dns.port says otherwise.
const corednsDefaultPort = "53"

// corednsDefaultCorefile is what CoreDNS serves when it finds no
// Corefile: whoami on the default port.
const corednsDefaultCorefile = ". {\n\twhoami\n}\n"

// corednsPlugins are the plugins /coredns serves.
var corednsPlugins = []string{"errors", "forward", "hosts", "log", "whoami"}

// corednsBlock is one server block of a Corefile.
type corednsBlock struct {
	zones   []string // fully qualified, lower case
	port    string   // "" when the block names none: the default port
	hosts   *corednsHosts
	forward *corednsForward
	whoami  bool
	log     bool
	errors  bool
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

// parseCorednsHosts reads `hosts [FILE [ZONES…]] { ENTRIES… }`.
func parseCorednsHosts(args []string, entries [][]string, readFile func(string) ([]byte, error)) (*corednsHosts, error) {
	h := &corednsHosts{names: map[string][]netip.Addr{}, reverse: map[string][]string{}, ttl: 3600}
	reverse := true
	for _, e := range entries {
		switch e[0] {
		case "fallthrough":
			h.fallThrough = true
		case "no_reverse":
			reverse = false
		case "reload":
		case "ttl":
			if len(e) != 2 {
				return nil, errors.New("hosts: ttl wants one value")
			}
			ttl, err := strconv.ParseUint(e[1], 10, 32)
			if err != nil {
				return nil, fmt.Errorf("hosts: ttl %q: %w", e[1], err)
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
			return nil, err
		}
		h.add(ip, names, reverse)
	}
	if len(args) > 0 {
		data, err := readFile(args[0])
		if err != nil {
			return nil, fmt.Errorf("hosts file: %w", err)
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
	return h, nil
}

// answer is the hosts plugin's reply to q (one question, its name in
// lower case), nil when it falls through to the next plugin.
func (h *corednsHosts) answer(q *dns.Msg, name string) *dns.Msg {
	qs := q.Question[0]
	m := new(dns.Msg)
	m.SetReply(q)
	m.Authoritative = true
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
	return nil
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
		var b corednsBlock
		for _, key := range head[:len(head)-1] {
			zone, port, found := strings.Cut(strings.TrimPrefix(key, "dns://"), ":")
			if found {
				if _, err := strconv.ParseUint(port, 10, 16); err != nil {
					return nil, fmt.Errorf("corefile: server block key %q: bad port", key)
				}
				if b.port != "" && b.port != port {
					return nil, fmt.Errorf("corefile: server block %q: keys of two ports", strings.Join(head, " "))
				}
				b.port = port
			}
			if zone == "" {
				zone = "."
			}
			b.zones = append(b.zones, strings.ToLower(dns.Fqdn(zone)))
		}
		used := map[string]bool{}
		for i++; ; i++ {
			if i >= len(lines) {
				return nil, errors.New("corefile: a server block is not closed")
			}
			l := lines[i]
			if l[0] == "}" {
				break
			}
			name, args := l[0], l[1:]
			// A plugin's options are lines in braces after its arguments.
			var opts [][]string
			if len(args) > 0 && args[len(args)-1] == "{" {
				args = args[:len(args)-1]
				opts = [][]string{}
				for i++; i < len(lines) && lines[i][0] != "}"; i++ {
					opts = append(opts, lines[i])
				}
				if i >= len(lines) {
					return nil, fmt.Errorf("corefile: the %s block is not closed", name)
				}
			}
			if used[name] && name != "log" {
				return nil, fmt.Errorf("corefile: plugin %q is used twice in server block %q (once per block)", name, strings.Join(head[:len(head)-1], " "))
			}
			used[name] = true
			var err error
			switch name {
			case "log":
				b.log = true
			case "errors":
				if len(args) > 0 || opts != nil {
					err = errors.New("errors: arguments and options are not served (plain errors is)")
				}
				b.errors = true
			case "whoami":
				if len(args) > 0 || opts != nil {
					err = errors.New("whoami takes no arguments")
				}
				b.whoami = true
			case "hosts":
				b.hosts, err = parseCorednsHosts(args, opts, readFile)
			case "forward":
				b.forward, err = parseCorednsForward(args, opts, readFile)
			default:
				err = fmt.Errorf("plugin %q is not served by svcnet's /coredns (%s are)", name, strings.Join(corednsPlugins, ", "))
			}
			if err != nil {
				return nil, fmt.Errorf("corefile: %w", err)
			}
		}
		blocks = append(blocks, b)
	}
	if len(blocks) == 0 {
		return nil, errors.New("corefile: no server block")
	}
	return blocks, nil
}

// corednsQuery is a query as a server got it.
type corednsQuery struct {
	msg    *dns.Msg
	client netip.AddrPort
	proto  string // "udp" or "tcp"
}

// corednsServer answers the queries to one port: the blocks of that
// port's Corefile.
type corednsServer struct {
	blocks []corednsBlock
	// try bounds each of forward's tries.
	try time.Duration
	log *log.Logger
	// ctx ends with the program.
	ctx context.Context
}

// block is the block of the longest zone that holds name, nil if none.
func (s *corednsServer) block(name string) *corednsBlock {
	var block *corednsBlock
	best := -1
	for i := range s.blocks {
		for _, z := range s.blocks[i].zones {
			if dns.IsSubDomain(z, name) && dns.CountLabel(z) > best {
				block, best = &s.blocks[i], dns.CountLabel(z)
			}
		}
	}
	return block
}

// answer is CoreDNS's reply to q: REFUSED when no block holds the name,
// else the reply of the first of its block's plugins that answers —
// hosts, forward (for names under its FROM), whoami — and SERVFAIL
// when none does. It returns the block and the error the query met
// (for the errors plugin).
func (s *corednsServer) answer(ctx context.Context, q corednsQuery) (*corednsBlock, *dns.Msg, error) {
	m := new(dns.Msg)
	if len(q.msg.Question) != 1 {
		m.SetRcode(q.msg, dns.RcodeFormatError)
		return nil, m, nil
	}
	name := strings.ToLower(q.msg.Question[0].Name)
	block := s.block(name)
	if block == nil {
		m.SetRcode(q.msg, dns.RcodeRefused)
		return nil, m, nil
	}
	if h := block.hosts; h != nil {
		if m := h.answer(q.msg, name); m != nil {
			return block, m, nil
		}
	}
	if f := block.forward; f != nil && dns.IsSubDomain(f.from, name) {
		r, err := f.exchange(ctx, q.msg, q.proto, cmp.Or(s.try, corednsForwardTry))
		if err != nil {
			m.SetRcode(q.msg, dns.RcodeServerFailure)
			return block, m, err
		}
		return block, r, nil
	}
	if block.whoami {
		return block, corednsWhoami(q.msg, q.client, q.proto), nil
	}
	m.SetRcode(q.msg, dns.RcodeServerFailure)
	return block, m, errors.New("no next plugin found")
}

// ServeDNS answers a query, logs it for the log and errors plugins of
// its block, and fits a UDP reply to the client's buffer.
func (s *corednsServer) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	q := corednsQuery{msg: r, proto: "udp"}
	switch a := w.RemoteAddr().(type) {
	case *net.UDPAddr:
		q.client = a.AddrPort()
	case *net.TCPAddr:
		q.client, q.proto = a.AddrPort(), "tcp"
	}
	block, m, err := s.answer(s.ctx, q)
	if block != nil {
		qs := r.Question[0]
		if err != nil && block.errors {
			s.log.Printf("[ERROR] plugin/errors: %d %s %s: %v", m.Rcode, qs.Name, dns.TypeToString[qs.Qtype], err)
		}
		if block.log {
			s.log.Printf("[INFO] %s - %d \"%s IN %s %s\" %s", w.RemoteAddr(), r.Id, dns.TypeToString[qs.Qtype],
				qs.Name, q.proto, dns.RcodeToString[m.Rcode])
		}
	}
	if q.proto == "udp" {
		size := dns.MinMsgSize
		if opt := r.IsEdns0(); opt != nil && int(opt.UDPSize()) > size {
			size = int(opt.UDPSize())
		}
		m.Truncate(size)
	}
	_ = w.WriteMsg(m)
}

// corefile is the Corefile to serve: conf, else ./Corefile, else
// CoreDNS's default one.
func corefile(conf string) (string, error) {
	if conf != "" {
		text, err := os.ReadFile(conf)
		return string(text), err
	}
	text, err := os.ReadFile("Corefile")
	if errors.Is(err, fs.ErrNotExist) {
		return corednsDefaultCorefile, nil
	}
	return string(text), err
}

// corednsProgram is /coredns with CoreDNS's command line: it serves
// the Corefile's blocks on UDP and TCP until ctx ends.
func corednsProgram(ctx context.Context, env *agnhostEnv, args []string) error {
	flags := flag.NewFlagSet("coredns", flag.ContinueOnError)
	flags.SetOutput(env.stderr)
	conf := flags.String("conf", "", `Corefile to load (default "Corefile")`)
	port := flags.String("dns.port", corednsDefaultPort, "Default port")
	flags.StringVar(port, "p", corednsDefaultPort, "Default port")
	pidfile := flags.String("pidfile", "", "Path to write pid file")
	plugins := flags.Bool("plugins", false, "List installed plugins")
	quiet := flags.Bool("quiet", false, "Quiet mode (no initialization output)")
	version := flags.Bool("version", false, "Show version")
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return agnhostExit(0)
		}
		return err
	}
	if flags.NArg() > 0 {
		return fmt.Errorf("coredns: extra command line arguments: %q", flags.Args())
	}
	if _, err := strconv.ParseUint(*port, 10, 16); err != nil {
		return fmt.Errorf("coredns: -dns.port %q is not a port", *port)
	}
	switch {
	case *version:
		fmt.Fprintln(env.stdout, "CoreDNS-svcnet")
		return nil
	case *plugins:
		fmt.Fprintln(env.stdout, "Server types:\n  dns\n\nOther plugins:")
		for _, p := range corednsPlugins {
			fmt.Fprintln(env.stdout, "  dns."+p)
		}
		return nil
	}
	text, err := corefile(*conf)
	if err != nil {
		return fmt.Errorf("coredns: %w", err)
	}
	blocks, err := parseCorefile(text, os.ReadFile)
	if err != nil {
		return fmt.Errorf("coredns: %w", err)
	}
	byPort := map[string][]corednsBlock{}
	for _, b := range blocks {
		p := cmp.Or(b.port, *port)
		for _, z := range b.zones {
			if slices.ContainsFunc(byPort[p], func(o corednsBlock) bool { return slices.Contains(o.zones, z) }) {
				return fmt.Errorf("coredns: corefile: zone %s on port %s is in two server blocks", z, p)
			}
		}
		byPort[p] = append(byPort[p], b)
	}
	if *pidfile != "" {
		if err := os.WriteFile(*pidfile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
			return fmt.Errorf("coredns: %w", err)
		}
	}
	var servers []*dns.Server
	var banner []string
	defer func() {
		for _, s := range servers {
			if s.PacketConn != nil {
				s.PacketConn.Close()
			}
			if s.Listener != nil {
				s.Listener.Close()
			}
		}
	}()
	for _, p := range slices.Sorted(maps.Keys(byPort)) {
		handler := &corednsServer{blocks: byPort[p], try: env.forwardTimeout, log: env.logger(), ctx: ctx}
		pc, err := net.ListenPacket("udp", env.addr("", p))
		if err != nil {
			return fmt.Errorf("coredns: %w", err)
		}
		servers = append(servers, &dns.Server{PacketConn: pc, Handler: handler})
		bound := strconv.Itoa(pc.LocalAddr().(*net.UDPAddr).Port)
		l, err := net.Listen("tcp", env.addr("", bound))
		if err != nil {
			return fmt.Errorf("coredns: %w", err)
		}
		servers = append(servers, &dns.Server{Listener: l, Handler: handler})
		env.announce("dns-udp", pc.LocalAddr())
		env.announce("dns-tcp", l.Addr())
		for _, b := range byPort[p] {
			for _, z := range b.zones {
				banner = append(banner, z+":"+bound)
			}
		}
	}
	if !*quiet {
		banner = append(banner, "CoreDNS-svcnet ("+strings.Join(corednsPlugins, ", ")+")")
		fmt.Fprintln(env.stdout, strings.Join(banner, "\n"))
	}
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
	servers = nil
	return err
}
