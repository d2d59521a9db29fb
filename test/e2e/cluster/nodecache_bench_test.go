package cluster_test

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// probeArg, as the test binary's first argument, makes it the DNS probe
// that BenchmarkNodeLocalDNS runs inside a pod (see TestMain).
const probeArg = "svcnet-dns-probe"

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == probeArg {
		os.Exit(dnsProbe(os.Args[2:]))
	}
	os.Exit(m.Run())
}

// dnsProbe asks SERVER for NAME (A) COUNT times, one question at a time,
// each from a new UDP socket as a pod's stub resolver does (so each one
// is a new flow for conntrack), and prints the latencies in microseconds,
// sorted, on one line.
func dnsProbe(args []string) int {
	if len(args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: svcnet-dns-probe SERVER NAME COUNT")
		return 2
	}
	n, err := strconv.Atoi(args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	c := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
	req := new(dns.Msg)
	req.SetQuestion(dns.Fqdn(args[1]), dns.TypeA)
	var lat []int64
	failed := 0
	for range n {
		start := time.Now()
		m, _, err := c.Exchange(req, args[0])
		if err != nil || m.Rcode != dns.RcodeSuccess || len(m.Answer) == 0 {
			failed++
			continue
		}
		lat = append(lat, time.Since(start).Microseconds())
	}
	slices.Sort(lat)
	var b strings.Builder
	fmt.Fprintf(&b, "failed=%d", failed)
	for _, l := range lat {
		fmt.Fprintf(&b, " %d", l)
	}
	fmt.Println(b.String())
	return 0
}

// BenchmarkNodeLocalDNS measures what a pod's lookups cost with the
// node-local cache and without it, in one cluster: a pod asks its node's
// cache (169.254.20.10, as its resolv.conf says) and then the cluster
// DNS's ClusterIP (10.96.0.10, the path without the cache: DNAT and a
// conntrack entry per query to a replica on this or the other node) for
// the same cluster name, 2,000 times each, one question at a time from a
// new socket, as glibc's stub resolver asks.
//
//	go test ./test/e2e/cluster -run - -bench NodeLocalDNS -benchtime 1x -v
func BenchmarkNodeLocalDNS(b *testing.B) {
	c := up(b, 2)
	c.kubectl.MustRun(`apiVersion: v1
kind: Pod
metadata: {name: asker}
spec:
  containers: [{name: c, image: host, command: [sleep, "3600"]}]
`, "apply", "-f", "-")
	c.until("the pod running", time.Minute, func() bool { return len(podNames(c, "")) >= 1 })
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	const name, count = "kube-dns.kube-system.svc.cluster.local", 2000
	for _, path := range []struct{ what, server string }{
		{"node-local-cache", "169.254.20.10:53"},
		{"cluster-ip", "10.96.0.10:53"},
	} {
		b.Run(path.what, func(b *testing.B) {
			for range b.N {
				out, err := c.exec("default/asker", self, probeArg, path.server, name, strconv.Itoa(count))
				if err != nil {
					b.Fatalf("probe: %v\n%s", err, out)
				}
				f := strings.Fields(strings.TrimSpace(out))
				if len(f) < 2 || !strings.HasPrefix(f[0], "failed=") {
					b.Fatalf("probe said %q", out)
				}
				var lat []float64
				for _, s := range f[1:] {
					v, _ := strconv.ParseFloat(s, 64)
					lat = append(lat, v/1000)
				}
				q := func(p float64) float64 { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
				b.ReportMetric(q(0.5), "p50-ms")
				b.ReportMetric(q(0.9), "p90-ms")
				b.ReportMetric(q(0.99), "p99-ms")
				b.ReportMetric(q(1), "max-ms")
				b.Logf("%s (%s): %d lookups of %s, %s: p50 %.3f ms, p90 %.3f, p99 %.3f, max %.3f",
					path.what, path.server, len(lat), name, f[0], q(0.5), q(0.9), q(0.99), q(1))
			}
		})
	}
}
