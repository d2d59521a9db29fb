package ebpf_test

import (
	"math"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/proxy/ebpf"
	"github.com/svcnet/svcnet/internal/proxy/proxytest"
	"github.com/svcnet/svcnet/internal/proxy/trace"
)

// TestGolden builds the maps for each kube-proxy case, compares them with
// their golden file, and traces every check through them. A socket-level
// translation never masquerades: a pod reaching itself through its
// Service connects to itself directly, and the node's connect takes the
// node's address as any other would; so masquerading is compared for
// clients outside the node only.
func TestGolden(t *testing.T) {
	for _, fx := range proxytest.Fixtures {
		t.Run(fx.Name, func(t *testing.T) {
			node, _ := fx.Node()
			table := ebpf.Build(ebpf.Config{NodeConfig: node}, proxytest.Snapshot(fx.Objects), nil)
			proxytest.CompareGolden(t, filepath.Join("testdata", fx.Name+".golden"), []byte(table.Format()))
			for _, c := range fx.Checks {
				t.Run(c.Name, func(t *testing.T) {
					env := ebpf.Env{ClusterCIDR: node.ClusterCIDR, Sticky: map[ebpf.TargetName]netip.AddrPort{}}
					for _, s := range c.Affinity {
						for _, scope := range []ebpf.Scope{ebpf.Internal, ebpf.External, ebpf.Outside, ebpf.OutsideRanged} {
							env.Sticky[ebpf.TargetName{Port: s.Port, Scope: scope}] = netip.MustParseAddrPort(s.Endpoint)
						}
					}
					outside := !c.Pkt.Local && !node.ClusterCIDR.Contains(c.Pkt.Src)
					checkOutcomes(t, ebpf.Trace(table, c.Pkt, env), c.Want, outside)
				})
			}
		})
	}
}

func checkOutcomes(t *testing.T, res *trace.Result, want []proxytest.Outcome, masq bool) {
	t.Helper()
	got := res.Outcomes()
	ok := len(got) == len(want)
	for i := 0; ok && i < len(got); i++ {
		g, w := got[i], want[i]
		ok = g.Verdict == w.Verdict && math.Abs(g.Probability-w.P) < 1e-6 && (w.Verdict != "ACCEPT" || g.Dst.String() == w.Dst) &&
			(!masq || g.Masquerade == w.Masq)
	}
	if !ok || len(res.Warnings) > 0 {
		var b strings.Builder
		res.Write(&b)
		t.Errorf("got %+v\nwant %+v\n%s", got, want, b.String())
	}
}

// TestTraceMaglev: with Maglev, a packet from outside reaches each
// backend with its share of the table (a whole table's worth in all).
func TestTraceMaglev(t *testing.T) {
	fx := proxytest.Fixtures[1] // nodeport
	node, _ := fx.Node()
	table := ebpf.Build(ebpf.Config{NodeConfig: node, Maglev: true}, proxytest.Snapshot(fx.Objects), nil)
	res := ebpf.Trace(table, proxytest.Pkt(proxytest.Outsider, "192.168.0.10:30080", "tcp"), ebpf.Env{ClusterCIDR: node.ClusterCIDR})
	var b strings.Builder
	res.Write(&b)
	total := 0.0
	for _, o := range res.Outcomes() {
		if !o.Masquerade || o.Probability < 0.45 || o.Probability > 0.55 {
			t.Errorf("outcome %+v, want about half, masqueraded", o)
		}
		total += o.Probability
	}
	if math.Abs(total-1) > 1e-9 || !strings.Contains(b.String(), "Maglev table") {
		t.Errorf("shares add to %f:\n%s", total, b.String())
	}
}
