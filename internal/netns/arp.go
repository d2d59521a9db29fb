package netns

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"

	"golang.org/x/sys/unix"
)

// GratuitousARP announces that ip is at ifname's hardware address, from
// inside the named namespace, as CNI's bridge plugin does for a new pod:
// every host on the link that still maps ip to another address (a deleted
// pod that had it) updates its neighbour entry at once, instead of sending
// to a dead hardware address until the entry goes stale.
func GratuitousARP(name, ifname string, ip netip.Addr) error {
	if !ip.Is4() {
		return fmt.Errorf("gratuitous ARP for %s: IPv4 only", ip)
	}
	return Do(name, func() error {
		ifi, err := net.InterfaceByName(ifname)
		if err != nil {
			return fmt.Errorf("gratuitous ARP: %w", err)
		}
		if len(ifi.HardwareAddr) != 6 {
			return fmt.Errorf("gratuitous ARP on %s: not an Ethernet link", ifname)
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ARP)))
		if err != nil {
			return fmt.Errorf("gratuitous ARP: packet socket: %w", err)
		}
		defer unix.Close(fd)
		to := &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ARP), Ifindex: ifi.Index, Halen: 6,
			Addr: [8]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}
		if err := unix.Sendto(fd, GratuitousARPFrame(ifi.HardwareAddr, ip), 0, to); err != nil {
			return fmt.Errorf("gratuitous ARP on %s in %s: %w", ifname, name, err)
		}
		return nil
	})
}

// GratuitousARPFrame is the Ethernet frame of an ARP request for ip sent
// by ip itself (sender and target address equal, target hardware address
// zero), broadcast: what Linux treats as a gratuitous ARP and lets
// override a neighbour entry.
func GratuitousARPFrame(mac net.HardwareAddr, ip netip.Addr) []byte {
	f := make([]byte, 0, 42)
	f = append(f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff) // to everyone
	f = append(f, mac[:6]...)
	f = binary.BigEndian.AppendUint16(f, unix.ETH_P_ARP)
	f = binary.BigEndian.AppendUint16(f, 1)      // hardware: Ethernet
	f = binary.BigEndian.AppendUint16(f, 0x0800) // protocol: IPv4
	f = append(f, 6, 4)
	f = binary.BigEndian.AppendUint16(f, 1) // request
	a := ip.As4()
	f = append(f, mac[:6]...)
	f = append(f, a[:]...)
	f = append(f, 0, 0, 0, 0, 0, 0)
	return append(f, a[:]...)
}

// htons is v in network byte order, as the socket calls take it.
func htons(v uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return binary.NativeEndian.Uint16(b[:])
}
