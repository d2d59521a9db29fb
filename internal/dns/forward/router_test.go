package forward

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/svcnet/svcnet/internal/dns/dnstest"
)

// TestRouter sends names to the most specific zone's servers, the rest to
// the default ones; a zone's dead server does not touch the default
// route; Set changes the routes in place, keeping the forwarders (and
// their caches) whose servers did not change, and refuses bad routes
// without changing anything.
func TestRouter(t *testing.T) {
	def, acme, lab := dnstest.StartUpstream(t), dnstest.StartUpstream(t), dnstest.StartUpstream(t)
	def.Add(t, "www.example.com. 60 IN A 192.0.2.1", "www.acme.local. 60 IN A 192.0.2.99")
	acme.Add(t, "www.acme.local. 60 IN A 198.51.100.1")
	lab.Add(t, "db.lab.acme.local. 60 IN A 198.51.100.2")
	r, err := NewRouter(Options{Logger: slog.New(slog.DiscardHandler), Timeout: 300 * time.Millisecond, Registerer: prometheus.NewRegistry()},
		Routes{Default: []string{def.Addr}, Zones: map[string][]string{"Acme.Local": {acme.Addr}, "lab.acme.local.": {lab.Addr}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	ask := func(name string) (*dns.Msg, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return r.Exchange(ctx, dns.Question{Name: name, Qtype: dns.TypeA, Qclass: dns.ClassINET}, false)
	}
	for _, c := range []struct {
		name, want string
		rcode      int
	}{
		{"www.example.com.", "192.0.2.1", dns.RcodeSuccess},
		{"WWW.ACME.LOCAL.", "198.51.100.1", dns.RcodeSuccess},    // its zone, not the default
		{"db.lab.acme.local.", "198.51.100.2", dns.RcodeSuccess}, // the longest zone
		{"db.acme.local.", "", dns.RcodeNameError},               // acme's own denial
		{"www.notacme.local.", "", dns.RcodeNameError},           // not a subdomain of acme.local
	} {
		m, err := ask(c.name)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got := ""
		if len(m.Answer) > 0 {
			got = m.Answer[0].(*dns.A).A.String()
		}
		if got != c.want || m.Rcode != c.rcode {
			t.Errorf("%s: %s %s, want %s %s", c.name, dns.RcodeToString[m.Rcode], got, dns.RcodeToString[c.rcode], c.want)
		}
	}
	if n := def.QueriesFor("db.acme.local."); n != 0 {
		t.Errorf("the default upstream was asked %d times for a name of a stub domain", n)
	}

	// A dead stub server: its zone fails, the default route stays healthy.
	acme.SetDown(true)
	for range 3 {
		if _, err := ask("down.acme.local."); err == nil {
			t.Fatal("a question for a zone whose server is down was answered")
		}
	}
	if r.Healthy() != 1 {
		t.Errorf("the default route has %d healthy upstreams, want 1", r.Healthy())
	}
	acme.SetDown(false)

	// Set: lab moves to acme's server, the default stays (and its cache).
	before := def.Queries()
	if err := r.Set(Routes{Default: []string{def.Addr}, Zones: map[string][]string{"lab.acme.local": {acme.Addr}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ask("www.example.com."); err != nil || def.Queries() != before {
		t.Errorf("after Set the default route lost its cache (%d more queries, %v)", def.Queries()-before, err)
	}
	if m, err := ask("www.acme.local."); err != nil || len(m.Answer) != 1 || m.Answer[0].(*dns.A).A.String() != "192.0.2.99" {
		t.Errorf("a zone removed by Set still routes: %v %v", m, err)
	}
	if m, err := ask("db.lab.acme.local."); err != nil || m.Rcode != dns.RcodeNameError {
		t.Errorf("a zone whose server changed answered from its old server's cache: %v %v", m, err)
	}
	for _, bad := range []Routes{
		{Zones: map[string][]string{"bad..zone": {acme.Addr}}},
		{Zones: map[string][]string{"x.local": {"not an address"}}},
		{Zones: map[string][]string{"x.local": nil}},
		{Zones: map[string][]string{"x.local": {acme.Addr}, "X.LOCAL.": {lab.Addr}}},
	} {
		if err := r.Set(bad); err == nil {
			t.Errorf("Set(%v) succeeded", bad)
		}
	}
	if got := r.Routes(); len(got.Default) != 1 || len(got.Zones) != 1 || got.Zones["lab.acme.local."][0] != acme.Addr {
		t.Errorf("a refused Set changed the routes: %+v", got)
	}

	// No default: names outside every zone have no route.
	if err := r.Set(Routes{Zones: map[string][]string{"acme.local": {acme.Addr}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ask("www.example.com."); !errors.Is(err, ErrNoRoute) {
		t.Errorf("without a default route: %v, want ErrNoRoute", err)
	}
}
