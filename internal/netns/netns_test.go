package netns

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
)

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root; CI runs as root")
	}
}

func TestNamespaceLifecycle(t *testing.T) {
	requireRoot(t)
	name := fmt.Sprintf("svcnet-test-ns-%d", rand.IntN(1e9))
	t.Cleanup(func() { _ = Delete(name) })
	if err := Create(name); err != nil {
		t.Fatal(err)
	}
	if err := Create(name); err != nil {
		t.Fatalf("create twice: %v", err)
	}
	names, err := List("svcnet-test-ns-")
	if err != nil || !strings.Contains(strings.Join(names, ","), name) {
		t.Fatalf("list: %v %v", names, err)
	}
	// A listener in the namespace is on its loopback, not the host's.
	l, err := Listen(name, "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		if c, err := l.Accept(); err == nil {
			c.Write([]byte("hello"))
			c.Close()
		}
	}()
	c, err := DialContext(t.Context(), name, "tcp", l.Addr().String())
	if err != nil {
		t.Fatalf("dial inside: %v", err)
	}
	buf := make([]byte, 5)
	if _, err := c.Read(buf); err != nil || string(buf) != "hello" {
		t.Fatalf("read %q %v", buf, err)
	}
	c.Close()
	hostBefore, _ := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	if err := Sysctl(name, "net.ipv4.ip_forward", "1"); err != nil {
		t.Fatal(err)
	}
	var got []byte
	if err := Do(name, func() (err error) { got, err = os.ReadFile("/proc/sys/net/ipv4/ip_forward"); return }); err != nil || strings.TrimSpace(string(got)) != "1" {
		t.Fatalf("sysctl inside: %q %v", got, err)
	}
	if host, _ := os.ReadFile("/proc/sys/net/ipv4/ip_forward"); string(host) != string(hostBefore) {
		t.Fatalf("host ip_forward changed from %q to %q", hostBefore, host)
	}
	if err := Create("not-ours"); err == nil {
		t.Fatal("created a namespace without the svcnet- prefix")
	}
	if err := Delete(name); err != nil || Exists(name) {
		t.Fatalf("delete: %v", err)
	}
}

// TestGratuitousARP: a neighbour that maps an address to a stale hardware
// address (a deleted pod's) learns the new one from the announcement.
func TestGratuitousARP(t *testing.T) {
	requireRoot(t)
	a := fmt.Sprintf("svcnet-test-garp-a-%d", rand.IntN(1e9))
	b := fmt.Sprintf("svcnet-test-garp-b-%d", rand.IntN(1e9))
	for _, n := range []string{a, b} {
		t.Cleanup(func() { _ = Delete(n) })
		if err := Create(n); err != nil {
			t.Fatal(err)
		}
	}
	ha, err := Handle(a)
	if err != nil {
		t.Fatal(err)
	}
	defer ha.Close()
	hb, err := Handle(b)
	if err != nil {
		t.Fatal(err)
	}
	defer hb.Close()
	fb, err := Fd(b)
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	if err := ha.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "eth0"}, PeerName: "eth1", PeerNamespace: netlink.NsFd(int(fb))}); err != nil {
		t.Fatal(err)
	}
	pod := netip.MustParseAddr("10.99.0.5")
	ea, _ := ha.LinkByName("eth0")
	eb, _ := hb.LinkByName("eth1")
	for _, x := range []struct {
		h    *netlink.Handle
		l    netlink.Link
		addr string
	}{{ha, ea, "10.99.0.5/24"}, {hb, eb, "10.99.0.1/24"}} {
		ad, _ := netlink.ParseAddr(x.addr)
		if err := x.h.AddrAdd(x.l, ad); err != nil {
			t.Fatal(err)
		}
		if err := x.h.LinkSetUp(x.l); err != nil {
			t.Fatal(err)
		}
	}
	stale, _ := net.ParseMAC("02:00:00:00:de:ad")
	if err := hb.NeighSet(&netlink.Neigh{LinkIndex: eb.Attrs().Index, IP: pod.AsSlice(), HardwareAddr: stale, State: netlink.NUD_REACHABLE}); err != nil {
		t.Fatal(err)
	}
	mac := func() string {
		ns, _ := hb.NeighList(eb.Attrs().Index, netlink.FAMILY_V4)
		for _, n := range ns {
			if n.IP.Equal(pod.AsSlice()) {
				return n.HardwareAddr.String()
			}
		}
		return ""
	}
	want := ea.Attrs().HardwareAddr.String()
	// The link comes up asynchronously: announce until heard (bounded).
	for i := 0; i < 50 && mac() != want; i++ {
		if err := GratuitousARP(a, "eth0", pod); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := mac(); got != want {
		t.Fatalf("neighbour entry of %s is %s after the announcement, want %s", pod, got, want)
	}
}

func TestGratuitousARPFrame(t *testing.T) {
	mac, _ := net.ParseMAC("02:42:ac:11:00:02")
	f := GratuitousARPFrame(mac, netip.MustParseAddr("10.244.1.3"))
	want := "ffffffffffff" + "0242ac110002" + "0806" + "0001" + "0800" + "0604" + "0001" +
		"0242ac110002" + "0af40103" + "000000000000" + "0af40103"
	if got := fmt.Sprintf("%x", f); got != want {
		t.Errorf("frame\n got %s\nwant %s", got, want)
	}
}
