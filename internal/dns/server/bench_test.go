package server

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/svcnet/svcnet/internal/dns/dnstest"
	"github.com/svcnet/svcnet/internal/dns/index"
)

// serverWithServices returns a server whose zone holds n Services,
// svc-I in namespace nsI%50, each with one ClusterIP and port http/80.
func serverWithServices(b *testing.B, n int) *Server {
	var svcs []*corev1.Service
	for i := range n {
		ip := netip.AddrFrom4([4]byte{10, 96 + byte(i>>16), byte(i >> 8), byte(i)}).String()
		svcs = append(svcs, dnstest.Service(fmt.Sprintf("ns%d", i%50), fmt.Sprintf("svc-%d", i), []string{ip},
			dnstest.Port("http", corev1.ProtocolTCP, 80)))
	}
	s, err := New(Options{Logger: quiet, Registerer: prometheus.NewRegistry()})
	if err != nil {
		b.Fatal(err)
	}
	s.SetIndex(index.Build(index.Options{}, svcs, nil, nil), time.Time{})
	return s
}

// BenchmarkHandle measures the work of one cluster answer without the
// socket, at the 10,000-Service scale of the dnsperf target.
func BenchmarkHandle(b *testing.B) {
	s := serverWithServices(b, 10000)
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

// BenchmarkHandleSpread asks every Service name of the zone in a shuffled
// order, memo warm, at 10,000 and 100,000 Services: what the size of the
// zone costs a query once every answer is packed (dnsperf's random-order
// run, without the socket).
func BenchmarkHandleSpread(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		s := serverWithServices(b, n)
		pkts := make([][]byte, n)
		for i, p := range rand.New(rand.NewPCG(1, 2)).Perm(n) {
			m := new(dns.Msg)
			m.SetQuestion(fmt.Sprintf("svc-%d.ns%d.svc.cluster.local.", p, p%50), dns.TypeA)
			pkts[i], _ = m.Pack()
		}
		client := netip.MustParseAddrPort("10.244.0.9:5353")
		out := make([]byte, dns.MaxMsgSize)
		var key []byte
		// The UDP loop's own path, memo included.
		ask := func(pkt []byte) {
			if resp, later := s.answerUDP(context.Background(), pkt, client, out, &key); later != nil || resp == nil {
				b.Fatal("no answer on the spot")
			}
		}
		for _, p := range pkts { // fill the memo
			ask(p)
		}
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				ask(pkts[i])
				if i++; i == len(pkts) {
					i = 0
				}
			}
		})
		// As serveUDP answers what one recvmmsg read: every entry found,
		// then verified, then the answers.
		b.Run(fmt.Sprintf("services=%d/batch=%d", n, batchSize), func(b *testing.B) {
			b.ReportAllocs()
			looks := make([]memoLook, batchSize)
			i := 0
			for b.Loop() {
				batch := pkts[i : i+batchSize]
				for j, p := range batch {
					s.lookUp(p, &looks[j])
				}
				find(looks)
				verify(looks)
				for j, p := range batch {
					if resp, later := s.answerLooked(context.Background(), p, client, out, &looks[j]); later != nil || resp == nil {
						b.Fatal("no answer on the spot")
					}
				}
				if i += batchSize; i+batchSize > len(pkts) {
					i = 0
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batchSize), "ns/query")
		})
	}
}
