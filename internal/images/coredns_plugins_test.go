package images

import (
	"context"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// gatewayConformanceCorefile is the Corefile of the ConfigMap coredns in
// the Gateway API conformance suite's base/manifests.yaml (v1.6.3), to
// the byte.
const gatewayConformanceCorefile = `.:53 {
    forward . 8.8.8.8 9.9.9.9
    log
    errors
}
foo.bar.com:53 {
  whoami
}
`

// TestCoreDNSGatewayConformanceCorefile: the suite's Corefile parses
// into its two blocks, and its query (foo.bar.com A) gets whoami's
// answer from the second one; nothing is sent anywhere.
func TestCoreDNSGatewayConformanceCorefile(t *testing.T) {
	blocks, err := parseCorefile(gatewayConformanceCorefile, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	want := []corednsBlock{
		{zones: []string{"."}, port: "53", log: true, errors: true,
			forward: &corednsForward{from: ".", to: []string{"8.8.8.8:53", "9.9.9.9:53"}}},
		{zones: []string{"foo.bar.com."}, port: "53", whoami: true},
	}
	if !reflect.DeepEqual(blocks, want) {
		t.Fatalf("parseCorefile = %+v, want %+v", blocks, want)
	}
	s := &corednsServer{blocks: blocks}
	q := new(dns.Msg)
	q.SetQuestion("foo.bar.com.", dns.TypeA)
	block, m, err := s.answer(context.Background(), corednsQuery{msg: q, client: netip.MustParseAddrPort("10.244.1.7:40000"), proto: "udp"})
	if err != nil || block != &s.blocks[1] {
		t.Fatalf("answer: block %v, %v; want the foo.bar.com block", block, err)
	}
	got := rrStrings(m.Extra)
	wantExtra := []string{"foo.bar.com.\t0\tIN\tA\t10.244.1.7", "_udp.foo.bar.com.\t0\tIN\tSRV\t0 0 40000 ."}
	if m.Rcode != dns.RcodeSuccess || len(m.Answer) != 0 || !slices.Equal(got, wantExtra) {
		t.Errorf("foo.bar.com A: %s, answer %v, extra %q; want NOERROR, no answer, extra %q", dns.RcodeToString[m.Rcode], m.Answer, got, wantExtra)
	}
}

func rrStrings(rrs []dns.RR) []string {
	var out []string
	for _, rr := range rrs {
		out = append(out, rr.String())
	}
	return out
}

// TestCoreDNSWhoamiAnswer: whoami's reply names the client's address
// and its port and transport, for any name and type.
func TestCoreDNSWhoamiAnswer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		qname  string
		qtype  uint16
		client string
		proto  string
		want   []string
	}{
		{"IPv4 over UDP", "example.org.", dns.TypeA, "10.0.0.1:53000", "udp",
			[]string{"example.org.\t0\tIN\tA\t10.0.0.1", "_udp.example.org.\t0\tIN\tSRV\t0 0 53000 ."}},
		{"IPv6 over TCP", "example.org.", dns.TypeAAAA, "[2001:db8::7]:41000", "tcp",
			[]string{"example.org.\t0\tIN\tAAAA\t2001:db8::7", "_tcp.example.org.\t0\tIN\tSRV\t0 0 41000 ."}},
		{"IPv4 on a dual-stack socket", "foo.bar.com.", dns.TypeA, "[::ffff:10.0.0.2]:1053", "udp",
			[]string{"foo.bar.com.\t0\tIN\tA\t10.0.0.2", "_udp.foo.bar.com.\t0\tIN\tSRV\t0 0 1053 ."}},
		{"any type", "foo.bar.com.", dns.TypeMX, "10.0.0.3:999", "udp",
			[]string{"foo.bar.com.\t0\tIN\tA\t10.0.0.3", "_udp.foo.bar.com.\t0\tIN\tSRV\t0 0 999 ."}},
		{"lower case", "Foo.Bar.COM.", dns.TypeA, "10.0.0.4:1000", "udp",
			[]string{"foo.bar.com.\t0\tIN\tA\t10.0.0.4", "_udp.foo.bar.com.\t0\tIN\tSRV\t0 0 1000 ."}},
		{"the root", ".", dns.TypeNS, "10.0.0.5:1001", "tcp",
			[]string{".\t0\tIN\tA\t10.0.0.5", "_tcp.\t0\tIN\tSRV\t0 0 1001 ."}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := new(dns.Msg)
			q.SetQuestion(tc.qname, tc.qtype)
			m := corednsWhoami(q, netip.MustParseAddrPort(tc.client), tc.proto)
			if m.Id != q.Id || !m.Response || !m.Authoritative || m.Rcode != dns.RcodeSuccess || len(m.Answer) != 0 {
				t.Errorf("header or answer: %v", m)
			}
			if got := rrStrings(m.Extra); !slices.Equal(got, tc.want) {
				t.Errorf("extra = %q, want %q", got, tc.want)
			}
			if _, err := m.Pack(); err != nil {
				t.Errorf("pack: %v", err)
			}
		})
	}
}

// TestCoreDNSUpstreams: the forms of forward's TO.
func TestCoreDNSUpstreams(t *testing.T) {
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(resolv, []byte("search example.org\nnameserver 192.0.2.1\nnameserver 2001:db8::1\noptions ndots:5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ to, want string }{
		{"8.8.8.8", "8.8.8.8:53"},
		{"8.8.8.8:5353", "8.8.8.8:5353"},
		{"dns://9.9.9.9", "9.9.9.9:53"},
		{"dns://127.0.0.1:1053", "127.0.0.1:1053"},
		{"2001:db8::53", "[2001:db8::53]:53"},
		{"[2001:db8::53]:5353", "[2001:db8::53]:5353"},
		{resolv, "192.0.2.1:53 [2001:db8::1]:53"},
	} {
		got, err := corednsUpstreams(tc.to, os.ReadFile)
		if err != nil || strings.Join(got, " ") != tc.want {
			t.Errorf("corednsUpstreams(%q) = %q, %v; want %q", tc.to, got, err, tc.want)
		}
	}
}

// startFakeUpstream starts a DNS server on loopback, UDP and TCP on one
// port, for forward to send to. It answers every query with an A record
// of 192.0.2.1 over UDP and 192.0.2.2 over TCP (the test sees which
// transport the query was forwarded by); silent, it never answers.
func startFakeUpstream(t *testing.T, silent bool) string {
	t.Helper()
	var pc net.PacketConn
	var l net.Listener
	for try := 0; l == nil; try++ {
		var err error
		if pc, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		if l, err = net.Listen("tcp", pc.LocalAddr().String()); err != nil {
			pc.Close()
			if try == 10 {
				t.Fatal(err)
			}
		}
	}
	addr := pc.LocalAddr().String()
	if silent {
		// Datagrams wait unread, connections wait unaccepted.
		t.Cleanup(func() { pc.Close(); l.Close() })
		return addr
	}
	handler := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		ip := net.IPv4(192, 0, 2, 1)
		if _, ok := w.RemoteAddr().(*net.TCPAddr); ok {
			ip = net.IPv4(192, 0, 2, 2)
		}
		m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: r.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 30}, A: ip})
		_ = w.WriteMsg(m)
	})
	servers := []*dns.Server{{PacketConn: pc, Handler: handler}, {Listener: l, Handler: handler}}
	for _, s := range servers {
		go func() { _ = s.ActivateAndServe() }()
	}
	t.Cleanup(func() {
		for _, s := range servers {
			_ = s.Shutdown()
		}
	})
	return addr
}

// TestCoreDNSServes: /coredns answers over UDP and TCP from the block
// of the query's zone: whoami with the client's own address and port,
// forward with its upstream's reply (over the query's transport, the
// next upstream when one does not answer), SERVFAIL when no upstream
// answers; the log and errors plugins log their own block's queries.
func TestCoreDNSServes(t *testing.T) {
	env, _, stderr := testAgnhostEnv(t)
	env.forwardTimeout = 200 * time.Millisecond
	up, dead := startFakeUpstream(t, false), startFakeUpstream(t, true)
	corefile := ".:0 {\n\tforward . " + up + "\n\tlog\n\terrors\n}\n" +
		"foo.bar.com:0 {\n  whoami\n}\n" +
		"dead.example:0 {\n\tforward . dns://" + dead + "\n\terrors\n}\n" +
		"second.example:0 {\n\tforward . " + dead + " " + up + "\n}\n"
	conf := filepath.Join(t.TempDir(), "Corefile")
	if err := os.WriteFile(conf, []byte(corefile), 0o644); err != nil {
		t.Fatal(err)
	}
	r := startAgnhost(t, env, 2, "/coredns", "-conf", conf)
	const (
		whoami = iota
		forwarded
		servfail
	)
	cases := []struct {
		name  string
		qtype uint16
		want  int
	}{
		{"foo.bar.com.", dns.TypeA, whoami},
		{"www.Foo.bar.com.", dns.TypeAAAA, whoami},
		{"example.org.", dns.TypeA, forwarded},
		{"second.example.", dns.TypeA, forwarded},
		{"x.dead.example.", dns.TypeA, servfail},
	}
	for _, proto := range []string{"udp", "tcp"} {
		for _, tc := range cases {
			t.Run(proto+" "+tc.name, func(t *testing.T) {
				c := &dns.Client{Net: proto}
				conn, err := c.Dial(r.addr(t, "dns-"+proto))
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
				q := new(dns.Msg)
				q.SetQuestion(tc.name, tc.qtype)
				if err := conn.WriteMsg(q); err != nil {
					t.Fatal(err)
				}
				m, err := conn.ReadMsg()
				if err != nil {
					t.Fatal(err)
				}
				switch tc.want {
				case whoami:
					local := netip.MustParseAddrPort(conn.LocalAddr().String())
					name := strings.ToLower(tc.name)
					want := []string{name + "\t0\tIN\tA\t127.0.0.1", "_" + proto + "." + name + "\t0\tIN\tSRV\t0 0 " + strconv.Itoa(int(local.Port())) + " ."}
					if got := rrStrings(m.Extra); m.Rcode != dns.RcodeSuccess || len(m.Answer) != 0 || !slices.Equal(got, want) {
						t.Errorf("%s, answer %v, extra %q; want whoami's %q", dns.RcodeToString[m.Rcode], m.Answer, got, want)
					}
				case forwarded:
					want := map[string]string{"udp": "192.0.2.1", "tcp": "192.0.2.2"}[proto]
					if got := rrStrings(m.Answer); m.Rcode != dns.RcodeSuccess || len(got) != 1 || !strings.HasSuffix(got[0], "\t"+want) {
						t.Errorf("%s %q; want the upstream's A %s (by %s)", dns.RcodeToString[m.Rcode], got, want, proto)
					}
				case servfail:
					if m.Rcode != dns.RcodeServerFailure || len(m.Answer) != 0 {
						t.Errorf("%s %v; want SERVFAIL", dns.RcodeToString[m.Rcode], m.Answer)
					}
				}
			})
		}
	}
	logged := stderr.String()
	for _, want := range []string{
		`"A IN example.org. udp" NOERROR`,
		`"A IN example.org. tcp" NOERROR`,
		"[ERROR] plugin/errors: 2 x.dead.example. A: forward: no upstream answered: ",
	} {
		if !strings.Contains(logged, want) {
			t.Errorf("stderr has no %q:\n%s", want, logged)
		}
	}
	for _, unwanted := range []string{"foo.bar.com", "second.example"} {
		if strings.Contains(logged, unwanted) {
			t.Errorf("stderr has %q, whose block neither logs nor had errors:\n%s", unwanted, logged)
		}
	}
}

// TestCoreDNSCommandLine: CoreDNS's flags, and its Corefile when -conf
// names none: ./Corefile, else whoami on the default port.
func TestCoreDNSCommandLine(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "Corefile")
	if err := os.WriteFile(conf, []byte(".:0 {\n\twhoami\n}\n.:0 {\n\twhoami\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string // error, "" for none
	}{
		{[]string{"-version"}, ""},
		{[]string{"-plugins"}, ""},
		{[]string{"-conf", conf, "extra"}, "extra command line arguments"},
		{[]string{"-dns.port", "x"}, `-dns.port "x" is not a port`},
		{[]string{"-conf", "/nonexistent/Corefile"}, "no such file"},
		{[]string{"-conf", conf}, "zone . on port 0 is in two server blocks"},
		{[]string{"-nope"}, "flag provided but not defined"},
	} {
		env, _, _ := testAgnhostEnv(t)
		err := env.run(context.Background(), append([]string{"/coredns"}, tc.args...))
		if (tc.want == "" && err != nil) || (tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want))) {
			t.Errorf("/coredns %q: %v, want %q", tc.args, err, tc.want)
		}
	}

	ask := func(t *testing.T, r *agnhostRun, name string) *dns.Msg {
		t.Helper()
		q := new(dns.Msg)
		q.SetQuestion(name, dns.TypeA)
		m, _, err := (&dns.Client{}).Exchange(q, r.addr(t, "dns-udp"))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	t.Chdir(t.TempDir())
	env, stdout, _ := testAgnhostEnv(t)
	r := startAgnhost(t, env, 2, "/coredns", "-dns.port", "0")
	if m := ask(t, r, "a.example."); len(m.Extra) != 2 || m.Extra[0].Header().Rrtype != dns.TypeA {
		t.Errorf("no Corefile: %v, want whoami's answer", m)
	}
	if !strings.Contains(stdout.String(), "CoreDNS-svcnet") {
		t.Errorf("no start-up lines on stdout: %q", stdout)
	}
	if err := os.WriteFile("Corefile", []byte(". {\n\thosts {\n\t\t192.0.2.9 a.example\n\t}\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env, stdout, _ = testAgnhostEnv(t)
	r = startAgnhost(t, env, 2, "/coredns", "-p", "0", "-quiet")
	if m := ask(t, r, "a.example."); len(m.Answer) != 1 || !strings.HasSuffix(m.Answer[0].String(), "192.0.2.9") {
		t.Errorf("./Corefile: %v, want its hosts entry", m)
	}
	if stdout.String() != "" {
		t.Errorf("-quiet: stdout %q", stdout)
	}
}

// TestCoreDNSImage: the CoreDNS image runs /coredns (the references
// it answers to are in TestLookup), with the container's args as
// CoreDNS's command line.
func TestCoreDNSImage(t *testing.T) {
	img, ok := Lookup("registry.k8s.io/coredns/coredns:v1.12.2")
	if !ok || Short(img) != "coredns" || img.Run == nil || !slices.Contains(img.Programs, "/coredns") {
		t.Fatalf("Lookup = %+v, %v; want the coredns image with /coredns", img, ok)
	}
	if err := img.Run(context.Background(), []string{"-version"}); err != nil {
		t.Errorf("coredns -version: %v", err)
	}
}
