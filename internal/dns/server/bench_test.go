package server

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/svcnet/svcnet/internal/dns/dnstest"
	"github.com/svcnet/svcnet/internal/dns/index"
)

// BenchmarkHandle measures the work of one cluster answer without the
// socket, at the 10,000-Service scale of the dnsperf target.
func BenchmarkHandle(b *testing.B) {
	var svcs []*corev1.Service
	for i := range 10000 {
		ip := netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}).String()
		svcs = append(svcs, dnstest.Service(fmt.Sprintf("ns%d", i%50), fmt.Sprintf("svc-%d", i), []string{ip},
			dnstest.Port("http", corev1.ProtocolTCP, 80)))
	}
	s, err := New(Options{Logger: quiet, Registerer: prometheus.NewRegistry()})
	if err != nil {
		b.Fatal(err)
	}
	s.SetIndex(index.Build(index.Options{}, svcs, nil, nil), time.Time{})
	for _, tc := range []struct {
		name  string
		qname string
	}{
		{"A", "svc-1234.ns34.svc.cluster.local."},
		{"NXDOMAIN", "nope.ns34.svc.cluster.local."},
	} {
		m := new(dns.Msg)
		m.SetQuestion(tc.qname, dns.TypeA)
		pkt, _ := m.Pack()
		client := netip.MustParseAddr("10.244.0.9")
		// The UDP loop's path: answer on the spot into a reused buffer.
		out := make([]byte, dns.MaxMsgSize)
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				q := s.begin(pkt, client, false)
				if q.wait != nil || s.finish(&q, out) == nil {
					b.Fatal("no answer on the spot")
				}
			}
		})
	}
}
