package nftables

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/netns"
	nft "github.com/svcnet/svcnet/internal/nftables"
)

// TestFixedLayout loads the fixed table into the kernel, in a network
// namespace of the test's own, for IPv4 and IPv6 and both NodePort
// address modes, and reads it back: every base chain on its hook at
// kube-proxy's priority, every jump, map and set, and the masquerade and
// no-endpoint rules.
func TestFixedLayout(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("loading nftables needs root; CI runs as root")
	}
	if _, err := exec.LookPath("nft"); err != nil {
		t.Fatal("nft is not installed (make deps installs nftables)")
	}
	cases := []struct {
		name   string
		layout Layout
		want   []string
		absent []string
	}{
		{"IPv4, NodePorts on every local address", Layout{ServiceCIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")},
			ClusterCIDR: netip.MustParsePrefix("10.244.0.0/16")},
			[]string{
				"type filter hook prerouting priority dstnat - 10; policy accept;",
				"type filter hook output priority -110; policy accept;",
				"type filter hook input priority filter; policy accept;",
				"type nat hook postrouting priority srcnat; policy accept;",
				"ct state new jump firewall-check",
				"ct state new jump cluster-ips-check",
				"jump services",
				"jump masquerading",
				"ip daddr . meta l4proto . th dport vmap @service-ips",
				"fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @service-nodeports",
				"ip daddr 10.96.0.0/12 drop comment \"Drop traffic to unallocated ClusterIPs\"",
				"meta mark & 0x00004000 != 0x00000000 meta mark set meta mark ^ 0x00004000 masquerade fully-random",
				"ct status dnat ip saddr . ip daddr . meta l4proto . th dport @hairpin-connections masquerade fully-random",
				"ip daddr @cluster-ips ip saddr != 10.244.0.0/16 meta mark set meta mark | 0x00004000 comment \"masquerade clusterIP traffic from outside cluster\"",
				"type ipv4_addr . ipv4_addr . inet_proto . inet_service",
				"type ipv4_addr . inet_proto . inet_service : verdict",
			},
			[]string{"set nodeport-ips", "mark-for-masquerade", "post-dnat"}},
		{"IPv4, masquerade all", Layout{MasqueradeAll: true, ClusterCIDR: netip.MustParsePrefix("10.244.0.0/16")},
			[]string{"ip daddr @cluster-ips meta mark set meta mark | 0x00004000 comment \"masquerade all clusterIP traffic\""},
			[]string{"from outside cluster"}},
		{"IPv4, NodePorts on the node's address", Layout{NodePortIPs: []netip.Addr{netip.MustParseAddr("172.18.0.11"), netip.MustParseAddr("127.0.0.1")}},
			[]string{"set nodeport-ips", "elements = { 172.18.0.11 }", "ip daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports"},
			[]string{"127.0.0.1 }", "Drop traffic to unallocated ClusterIPs"}},
		{"IPv6", Layout{IPv6: true, ServiceCIDRs: []netip.Prefix{netip.MustParsePrefix("fd00:10:96::/108")}},
			[]string{"table ip6 kube-proxy", "ip6 daddr . meta l4proto . th dport vmap @service-ips", "ip6 daddr != ::1", "type ipv6_addr"},
			nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := fmt.Sprintf("svcnet-test-nft-%d", rand.IntN(1e9))
			if err := netns.Create(ns); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = netns.Delete(ns) })
			fixed := tc.layout.Fixed()
			tx := nft.NewTx(fixed.Family, fixed.Name)
			tx.AddAll(fixed)
			if err := netns.Do(ns, func() error {
				c, err := nft.Open()
				if err != nil {
					return err
				}
				defer c.Close()
				return c.Run(tx)
			}); err != nil {
				t.Fatalf("the kernel refused the layout: %v\n%s", err, fixed.Format())
			}
			family := "ip"
			if tc.layout.IPv6 {
				family = "ip6"
			}
			out, err := exec.Command("ip", "netns", "exec", ns, "nft", "list", "table", family, TableName).CombinedOutput()
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			listed := string(out)
			for _, w := range tc.want {
				if !strings.Contains(listed, w) {
					t.Errorf("missing %q in:\n%s", w, listed)
				}
			}
			for _, a := range tc.absent {
				if strings.Contains(listed, a) {
					t.Errorf("unexpected %q in:\n%s", a, listed)
				}
			}
			for _, c := range baseChains {
				if !strings.Contains(listed, "chain "+c.Name+" {") {
					t.Errorf("base chain %s missing", c.Name)
				}
			}
		})
	}
}
