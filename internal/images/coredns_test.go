package images

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// TestAgnhostCoreDNS: /coredns serves the Corefile Kubernetes' DNS tests
// write (hosts entries, log), over UDP and TCP, with PTR records, NODATA
// and NXDOMAIN as CoreDNS's hosts plugin answers.
func TestAgnhostCoreDNS(t *testing.T) {
	env, _, stderr := testAgnhostEnv(t)
	conf := filepath.Join(t.TempDir(), "Corefile")
	// As generateCoreDNSConfigmap writes it, on a port of the test's.
	corefile := ".:0 {\n\thosts {\n\t\t1.1.1.1 notexistname.resolv.conf.local\n\t\t2001:db8::29 my.test\n\t}\n\tlog\n}\n"
	if err := os.WriteFile(conf, []byte(corefile), 0o644); err != nil {
		t.Fatal(err)
	}
	r := startAgnhost(t, env, 2, "/coredns", "-conf", conf)
	cases := []struct {
		name  string
		qtype uint16
		rcode int
		want  string // the answer's data, "" for none
	}{
		{"notexistname.resolv.conf.local.", dns.TypeA, dns.RcodeSuccess, "1.1.1.1"},
		{"NotExistName.resolv.conf.local.", dns.TypeA, dns.RcodeSuccess, "1.1.1.1"},
		{"notexistname.resolv.conf.local.", dns.TypeAAAA, dns.RcodeSuccess, ""},
		{"my.test.", dns.TypeAAAA, dns.RcodeSuccess, "2001:db8::29"},
		{"1.1.1.1.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, "notexistname.resolv.conf.local."},
		{"other.example.", dns.TypeA, dns.RcodeNameError, ""},
	}
	for _, proto := range []string{"dns-udp", "dns-tcp"} {
		addr := r.addrs[proto][0].String()
		for _, tc := range cases {
			q := new(dns.Msg)
			q.SetQuestion(tc.name, tc.qtype)
			c := &dns.Client{Net: strings.TrimPrefix(proto, "dns-")}
			m, _, err := c.Exchange(q, addr)
			if err != nil {
				t.Fatalf("%s %s: %v", proto, tc.name, err)
			}
			got := ""
			for _, rr := range m.Answer {
				f := strings.Fields(rr.String())
				got = f[len(f)-1]
			}
			if m.Rcode != tc.rcode || got != tc.want {
				t.Errorf("%s %s %s: %s %q, want %s %q", proto, tc.name, dns.TypeToString[tc.qtype], dns.RcodeToString[m.Rcode], got, dns.RcodeToString[tc.rcode], tc.want)
			}
		}
	}
	if !strings.Contains(stderr.String(), `"A IN notexistname.resolv.conf.local. udp`) {
		t.Errorf("log plugin: no query logged:\n%s", stderr)
	}
}

func TestParseCorefileRefuses(t *testing.T) {
	for _, tc := range []struct{ corefile, want string }{
		{". {\n\tcache 30\n}\n", `plugin "cache" is not served by svcnet's /coredns (errors, forward, hosts, log, whoami are)`},
		{". {\n\thosts {\n\t\tnot-an-ip name\n\t}\n}\n", "hosts entry"},
		{". {\n\tlog\n", "not closed"},
		{". {\n\thosts {\n", "the hosts block is not closed"},
		{"", "no server block"},
		{".:99999 {\n}\n", "bad port"},
		{"a.example:53 b.example:54 {\n}\n", "keys of two ports"},
		{". {\n\tforward .\n}\n", "want FROM TO"},
		{". {\n\tforward . tls://9.9.9.9\n}\n", "only plain DNS"},
		{". {\n\tforward . dns.google\n}\n", "want IP[:PORT] or a resolv.conf file"},
		{". {\n\tforward . dns.google:53\n}\n", "is not an IP address"},
		{". {\n\tforward . 8.8.8.8:99999\n}\n", "bad port"},
		{". {\n\tforward . /nonexistent/resolv.conf\n}\n", "no such file"},
		{". {\n\tforward . 8.8.8.8 {\n\t\tmax_fails 0\n\t}\n}\n", "options block is not served"},
		{". {\n\tforward . 8.8.8.8\n\tforward example.org 9.9.9.9\n}\n", `plugin "forward" is used twice`},
		{". {\n\twhoami\n\twhoami\n}\n", `plugin "whoami" is used twice`},
		{". {\n\twhoami now\n}\n", "whoami takes no arguments"},
		{". {\n\terrors stdout\n}\n", "errors: arguments and options are not served"},
	} {
		if _, err := parseCorefile(tc.corefile, os.ReadFile); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error with %q", tc.corefile, err, tc.want)
		}
	}
}
