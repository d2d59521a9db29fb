package bpflb

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// The tc verdicts the programs return.
const (
	tcOK   = 0
	tcShot = 2
)

// packet is a crafted Ethernet frame with an IPv4 or IPv6 header and a
// TCP or UDP header (and a few bytes of payload), its checksums right.
type packet struct {
	src, dst netip.AddrPort
	proto    uint8
	syn, ack bool
}

func (p packet) bytes() []byte {
	payload := []byte("svcnet")
	var l4 []byte
	if p.proto == unix.IPPROTO_TCP {
		l4 = make([]byte, 20)
		binary.BigEndian.PutUint16(l4[0:], p.src.Port())
		binary.BigEndian.PutUint16(l4[2:], p.dst.Port())
		l4[12] = 5 << 4
		if p.syn {
			l4[13] |= 0x02
		}
		if p.ack {
			l4[13] |= 0x10
		}
		binary.BigEndian.PutUint16(l4[14:], 65535)
	} else {
		l4 = make([]byte, 8)
		binary.BigEndian.PutUint16(l4[0:], p.src.Port())
		binary.BigEndian.PutUint16(l4[2:], p.dst.Port())
		binary.BigEndian.PutUint16(l4[4:], uint16(8+len(payload)))
	}
	l4 = append(l4, payload...)
	var l3 []byte
	eth := make([]byte, 14)
	if p.src.Addr().Is4() {
		binary.BigEndian.PutUint16(eth[12:], 0x0800)
		l3 = make([]byte, 20)
		l3[0] = 0x45
		binary.BigEndian.PutUint16(l3[2:], uint16(20+len(l4)))
		l3[8], l3[9] = 64, p.proto
		s, d := p.src.Addr().As4(), p.dst.Addr().As4()
		copy(l3[12:], s[:])
		copy(l3[16:], d[:])
		binary.BigEndian.PutUint16(l3[10:], checksum(l3, 0))
	} else {
		binary.BigEndian.PutUint16(eth[12:], 0x86dd)
		l3 = make([]byte, 40)
		l3[0] = 0x60
		binary.BigEndian.PutUint16(l3[4:], uint16(len(l4)))
		l3[6], l3[7] = p.proto, 64
		s, d := p.src.Addr().As16(), p.dst.Addr().As16()
		copy(l3[8:], s[:])
		copy(l3[24:], d[:])
	}
	binary.BigEndian.PutUint16(l4[l4csum(p.proto):], l4checksum(l3, l4, p.proto))
	return append(append(eth, l3...), l4...)
}

func l4csum(proto uint8) int {
	if proto == unix.IPPROTO_TCP {
		return 16
	}
	return 6
}

func checksum(b []byte, sum uint32) uint16 {
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// l4checksum is the TCP or UDP checksum of l4 (its checksum field zero)
// under the pseudo header of l3.
func l4checksum(l3, l4 []byte, proto uint8) uint16 {
	var pseudo []byte
	if l3[0]>>4 == 4 {
		pseudo = append(append([]byte{}, l3[12:20]...), 0, proto, byte(len(l4)>>8), byte(len(l4)))
	} else {
		pseudo = append(append([]byte{}, l3[8:40]...), 0, 0, byte(len(l4)>>8), byte(len(l4)), 0, 0, 0, proto)
	}
	return checksum(append(pseudo, l4...), 0)
}

// parsed reads a frame back, and checks its checksums.
func parsed(t *testing.T, b []byte) packet {
	t.Helper()
	var p packet
	l3 := b[14:]
	var l4 []byte
	if binary.BigEndian.Uint16(b[12:]) == 0x0800 {
		if checksum(l3[:20], 0) != 0 {
			t.Errorf("IPv4 header checksum wrong")
		}
		p.proto = l3[9]
		p.src = netip.AddrPortFrom(netip.AddrFrom4([4]byte(l3[12:16])), 0)
		p.dst = netip.AddrPortFrom(netip.AddrFrom4([4]byte(l3[16:20])), 0)
		l3, l4 = l3[:20], l3[20:]
	} else {
		p.proto = l3[6]
		p.src = netip.AddrPortFrom(netip.AddrFrom16([16]byte(l3[8:24])), 0)
		p.dst = netip.AddrPortFrom(netip.AddrFrom16([16]byte(l3[24:40])), 0)
		l3, l4 = l3[:40], l3[40:]
	}
	p.src = netip.AddrPortFrom(p.src.Addr(), binary.BigEndian.Uint16(l4[0:]))
	p.dst = netip.AddrPortFrom(p.dst.Addr(), binary.BigEndian.Uint16(l4[2:]))
	got := binary.BigEndian.Uint16(l4[l4csum(p.proto):])
	zeroed := append([]byte{}, l4...)
	zeroed[l4csum(p.proto)], zeroed[l4csum(p.proto)+1] = 0, 0
	if want := l4checksum(l3, zeroed, p.proto); got != want {
		t.Errorf("L4 checksum %#04x, want %#04x", got, want)
	}
	return p
}

// skbCtx is the start of struct __sk_buff, up to the mark (at 8).
type skbCtx struct {
	Len, PktType, Mark uint32
}

func run(t *testing.T, prog *ebpf.Program, in packet) (uint32, packet, uint32) {
	t.Helper()
	data := in.bytes()
	out := make([]byte, len(data)+64)
	// Room for the kernel's whole struct __sk_buff, whatever its size.
	ctxOut := make([]byte, 512)
	ret, err := prog.Run(&ebpf.RunOptions{Data: data, DataOut: out, Context: skbCtx{}, ContextOut: ctxOut})
	if err != nil {
		t.Fatal(err)
	}
	return ret, parsed(t, out[:len(data)]), binary.LittleEndian.Uint32(ctxOut[8:])
}

// TestPacketPath runs the tc programs on crafted packets
// (BPF_PROG_TEST_RUN): a client's first packet picks a backend and is
// translated to it, checksums right, marked to masquerade where the
// entry says; the flow's later packets follow; the backend's reply is
// translated back; sources outside an entry's ranges, and Local entries
// without a backend here, are dropped; what is not a service's passes.
func TestPacketPath(t *testing.T) {
	lb, err := Load(Sizes{Services: 64, IDs: 64, Backends: 256, Sockets: 64, Affinities: 64, Flows: 1024, Ranges: 64}, Options{MasqueradeMark: 0x8000})
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	put := func(k ServiceKey, v Service, b []netip.AddrPort, ranges ...netip.Prefix) {
		t.Helper()
		if err := lb.PutBackends([]BackendSet{{v.ID, v.Gen, b}}); err != nil {
			t.Fatal(err)
		}
		if err := lb.PutRanges(v.ID, ranges); err != nil {
			t.Fatal(err)
		}
		if err := lb.PutServices([]ServiceKey{k}, []Service{v}); err != nil {
			t.Fatal(err)
		}
	}
	ap := netip.MustParseAddrPort
	key := func(s string, proto uint8) ServiceKey {
		a := ap(s)
		return ServiceKey{Addr: a.Addr(), Port: a.Port(), Proto: proto, Scope: Packet}
	}
	tcp, udp := uint8(unix.IPPROTO_TCP), uint8(unix.IPPROTO_UDP)
	put(key("192.168.0.10:30080", tcp), Service{ID: 1, Count: 1, Flags: Masquerade}, []netip.AddrPort{ap("10.244.2.2:8080")})
	put(key("192.168.0.10:30053", udp), Service{ID: 2, Count: 1, Flags: Masquerade}, []netip.AddrPort{ap("10.244.2.3:5353")})
	put(key("192.168.0.10:30081", tcp), Service{ID: 3, Count: 1}, []netip.AddrPort{ap("10.244.1.4:8080")}) // Local
	put(key("192.168.0.10:30082", tcp), Service{ID: 4, Verdict: Drop}, nil)
	put(key("192.168.0.10:30083", tcp), Service{ID: 5, Verdict: Reject}, nil)
	put(key("198.51.100.10:80", tcp), Service{ID: 6, Count: 1, Flags: Masquerade | Ranged}, []netip.AddrPort{ap("10.244.2.5:8080")},
		netip.MustParsePrefix("203.0.113.0/24"))
	put(key("[fd00::10]:30080", tcp), Service{ID: 7, Count: 1, Flags: Masquerade}, []netip.AddrPort{ap("[fd00:244::2]:8080")})
	// Maglev: the table sends every flow to slot 2.
	put(key("192.168.0.10:30090", tcp), Service{ID: 8, Count: 3, Flags: Masquerade | Maglev},
		[]netip.AddrPort{ap("10.244.2.7:8080"), ap("10.244.2.8:8080"), ap("10.244.2.9:8080")})
	table := make([]uint16, MaglevSize)
	for i := range table {
		table[i] = 2
	}
	if err := lb.PutMaglev(8, 0, table); err != nil {
		t.Fatal(err)
	}
	// Someone else's socket-scope entry at the same address: not for packets.
	if err := lb.PutServices([]ServiceKey{{Addr: netip.MustParseAddr("192.168.0.10"), Port: 30099, Proto: tcp}}, []Service{{ID: 1, Count: 1}}); err != nil {
		t.Fatal(err)
	}

	client := ap("203.0.113.7:40000")
	cases := []struct {
		name     string
		in       packet
		ret      uint32
		wantDst  netip.AddrPort // zero: unchanged
		wantMark uint32
	}{
		{"tcp syn to a node port: to the backend, masqueraded", packet{src: client, dst: ap("192.168.0.10:30080"), proto: tcp, syn: true}, tcOK, ap("10.244.2.2:8080"), 0x8000},
		{"the flow's next packet follows", packet{src: client, dst: ap("192.168.0.10:30080"), proto: tcp, ack: true}, tcOK, ap("10.244.2.2:8080"), 0x8000},
		{"another flow's ack: not ours", packet{src: ap("203.0.113.8:40000"), dst: ap("192.168.0.10:30080"), proto: tcp, ack: true}, tcOK, netip.AddrPort{}, 0},
		{"udp", packet{src: client, dst: ap("192.168.0.10:30053"), proto: udp}, tcOK, ap("10.244.2.3:5353"), 0x8000},
		{"Local policy: client's address kept", packet{src: client, dst: ap("192.168.0.10:30081"), proto: tcp, syn: true}, tcOK, ap("10.244.1.4:8080"), 0},
		{"Local policy, no endpoint here: dropped", packet{src: client, dst: ap("192.168.0.10:30082"), proto: tcp, syn: true}, tcShot, netip.AddrPort{}, 0},
		{"no endpoint anywhere: left to the node, which refuses it", packet{src: client, dst: ap("192.168.0.10:30083"), proto: tcp, syn: true}, tcOK, netip.AddrPort{}, 0},
		{"source in range", packet{src: ap("203.0.113.9:40000"), dst: ap("198.51.100.10:80"), proto: tcp, syn: true}, tcOK, ap("10.244.2.5:8080"), 0x8000},
		{"source out of range: dropped", packet{src: ap("198.18.0.1:40000"), dst: ap("198.51.100.10:80"), proto: tcp, syn: true}, tcShot, netip.AddrPort{}, 0},
		{"ipv6", packet{src: ap("[2001:db8::7]:40000"), dst: ap("[fd00::10]:30080"), proto: tcp, syn: true}, tcOK, ap("[fd00:244::2]:8080"), 0x8000},
		{"a socket entry is not a packet's", packet{src: client, dst: ap("192.168.0.10:30099"), proto: tcp, syn: true}, tcOK, netip.AddrPort{}, 0},
		{"maglev: the table's backend", packet{src: ap("203.0.113.20:40001"), dst: ap("192.168.0.10:30090"), proto: tcp, syn: true}, tcOK, ap("10.244.2.9:8080"), 0x8000},
		{"maglev: another flow, the same", packet{src: ap("203.0.113.21:40002"), dst: ap("192.168.0.10:30090"), proto: tcp, syn: true}, tcOK, ap("10.244.2.9:8080"), 0x8000},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ret, out, mark := run(t, lb.objs.FromNet, c.in)
			if ret != c.ret {
				t.Fatalf("returned %d, want %d", ret, c.ret)
			}
			want := c.wantDst
			if !want.IsValid() {
				want = c.in.dst
			}
			if out.dst != want || out.src != c.in.src {
				t.Errorf("out %s -> %s, want %s -> %s", out.src, out.dst, c.in.src, want)
			}
			if mark != c.wantMark {
				t.Errorf("mark %#x, want %#x", mark, c.wantMark)
			}
		})
	}

	replies := []struct {
		name    string
		in      packet
		wantSrc netip.AddrPort
	}{
		{"tcp reply: from the node port", packet{src: ap("10.244.2.2:8080"), dst: client, proto: tcp, syn: true, ack: true}, ap("192.168.0.10:30080")},
		{"udp reply", packet{src: ap("10.244.2.3:5353"), dst: client, proto: udp}, ap("192.168.0.10:30053")},
		{"ipv6 reply", packet{src: ap("[fd00:244::2]:8080"), dst: ap("[2001:db8::7]:40000"), proto: tcp, ack: true}, ap("[fd00::10]:30080")},
		{"a pod's own traffic: untouched", packet{src: ap("10.244.2.2:8080"), dst: ap("203.0.113.99:40000"), proto: tcp, ack: true}, ap("10.244.2.2:8080")},
	}
	for _, c := range replies {
		t.Run(c.name, func(t *testing.T) {
			ret, out, _ := run(t, lb.objs.ToNet, c.in)
			if ret != tcOK {
				t.Fatalf("returned %d", ret)
			}
			if out.src != c.wantSrc || out.dst != c.in.dst {
				t.Errorf("out %s -> %s, want %s -> %s", out.src, out.dst, c.wantSrc, c.in.dst)
			}
		})
	}
	t.Run("forget a UDP backend", func(t *testing.T) {
		udpFlow := packet{src: client, dst: ap("192.168.0.10:30053"), proto: udp}
		tcpFlow := packet{src: client, dst: ap("192.168.0.10:30080"), proto: tcp}
		has := func(p packet) bool {
			var v lbFlowVal
			k := lbFlowKey{Sport: hton(p.src.Port()), Dport: hton(p.dst.Port()), Proto: p.proto, Family: 4}
			k.Saddr, _ = addr16(p.src.Addr())
			k.Daddr, _ = addr16(p.dst.Addr())
			return lb.objs.Flows.Lookup(k, &v) == nil
		}
		if !has(udpFlow) || !has(tcpFlow) {
			t.Fatal("the flows of the cases above are not in the map")
		}
		if _, err := lb.ForgetUDP([]netip.AddrPort{ap("10.244.2.3:5353"), ap("10.244.2.2:8080")}); err != nil {
			t.Fatal(err)
		}
		if has(udpFlow) {
			t.Error("the UDP flow to the removed backend is still there")
		}
		if !has(tcpFlow) {
			t.Error("a TCP flow was forgotten")
		}
		// Its replies are no longer translated back.
		if _, out, _ := run(t, lb.objs.ToNet, packet{src: ap("10.244.2.3:5353"), dst: client, proto: udp}); out.src != ap("10.244.2.3:5353") {
			t.Errorf("a reply of the forgotten flow was translated to %s", out.src)
		}
	})

}
