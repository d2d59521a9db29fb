package server

import (
	"encoding/binary"
	"net"
	"net/netip"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mmsghdr is struct mmsghdr (sys/socket.h): Go's alignment pads it as C
// does on every architecture.
type mmsghdr struct {
	hdr unix.Msghdr
	len uint32
}

// batchIO is one read loop's recvmmsg and sendmmsg, with every buffer,
// header and address allocated once: the loop then allocates nothing per
// query (x/net's ReadBatch allocates a *net.UDPAddr per datagram), so at
// 100k queries a second the garbage collector does not run, and its
// pauses do not reach the latency tail.
type batchIO struct {
	rc syscall.RawConn

	in      []mmsghdr
	inIov   []unix.Iovec
	inName  []unix.RawSockaddrInet6 // room for either family
	inBuf   [][]byte
	inOOB   [][]byte
	n       int
	readErr syscall.Errno
	readFn  func(fd uintptr) bool

	out      []mmsghdr
	outIov   []unix.Iovec
	outName  []unix.RawSockaddrInet6
	want     int
	sent     int
	writeErr syscall.Errno
	writeFn  func(fd uintptr) bool
}

// outMsg is one datagram to send.
type outMsg struct {
	buf []byte
	oob []byte
	to  netip.AddrPort
}

func newBatchIO(c *net.UDPConn, n, bufSize, oobSize int) (*batchIO, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	b := &batchIO{rc: rc,
		in: make([]mmsghdr, n), inIov: make([]unix.Iovec, n), inName: make([]unix.RawSockaddrInet6, n),
		inBuf: make([][]byte, n), inOOB: make([][]byte, n),
		out: make([]mmsghdr, n), outIov: make([]unix.Iovec, n), outName: make([]unix.RawSockaddrInet6, n)}
	for i := range n {
		b.inBuf[i] = make([]byte, bufSize)
		if oobSize > 0 {
			b.inOOB[i] = make([]byte, oobSize)
		}
	}
	b.readFn = b.recv
	b.writeFn = b.send
	return b, nil
}

// read waits for datagrams and reads up to a batch of them.
func (b *batchIO) read() (int, error) {
	for i := range b.in {
		h := &b.in[i].hdr
		b.inIov[i].Base = &b.inBuf[i][0]
		b.inIov[i].SetLen(len(b.inBuf[i]))
		h.Iov = &b.inIov[i]
		h.SetIovlen(1)
		h.Name = (*byte)(unsafe.Pointer(&b.inName[i]))
		h.Namelen = uint32(unsafe.Sizeof(b.inName[i]))
		h.Control, h.Controllen = nil, 0
		if len(b.inOOB[i]) > 0 {
			h.Control = &b.inOOB[i][0]
			h.SetControllen(len(b.inOOB[i]))
		}
		h.Flags = 0
		b.in[i].len = 0
	}
	b.n, b.readErr = 0, 0
	if err := b.rc.Read(b.readFn); err != nil {
		return 0, err
	}
	if b.readErr != 0 {
		return 0, b.readErr
	}
	return b.n, nil
}

func (b *batchIO) recv(fd uintptr) bool {
	r, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&b.in[0])), uintptr(len(b.in)), 0, 0, 0)
	if errno == unix.EAGAIN || errno == unix.EINTR {
		return false
	}
	b.n, b.readErr = int(r), errno
	return true
}

// msg is datagram i of the last read: its data, its sender (as the
// socket saw it: v4-mapped on a dual-stack socket) and its control
// messages.
func (b *batchIO) msg(i int) ([]byte, netip.AddrPort, []byte) {
	m := &b.in[i]
	data := b.inBuf[i][:min(int(m.len), len(b.inBuf[i]))]
	var oob []byte
	if b.inOOB[i] != nil {
		oob = b.inOOB[i][:min(int(m.hdr.Controllen), len(b.inOOB[i]))]
	}
	return data, sockaddrPort(&b.inName[i]), oob
}

// sockaddrPort reads a sockaddr_in or sockaddr_in6.
func sockaddrPort(sa *unix.RawSockaddrInet6) netip.AddrPort {
	switch sa.Family {
	case unix.AF_INET:
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		return netip.AddrPortFrom(netip.AddrFrom4(sa4.Addr), portOf(&sa4.Port))
	case unix.AF_INET6:
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr), portOf(&sa.Port))
	}
	return netip.AddrPort{}
}

// portOf reads a port kept in network byte order.
func portOf(p *uint16) uint16 {
	return binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(p))[:])
}

func putSockaddr(sa *unix.RawSockaddrInet6, ap netip.AddrPort) uint32 {
	if ap.Addr().Is4() {
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		*sa4 = unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: ap.Addr().As4()}
		binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&sa4.Port))[:], ap.Port())
		return uint32(unsafe.Sizeof(*sa4))
	}
	*sa = unix.RawSockaddrInet6{Family: unix.AF_INET6, Addr: ap.Addr().As16()}
	binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:], ap.Port())
	return uint32(unsafe.Sizeof(*sa))
}

// write sends ms, going past a datagram the kernel refuses (an address
// of the wrong family, say) so that one bad peer costs only its answer;
// the error is the last refusal's.
func (b *batchIO) write(ms []outMsg) error {
	if len(ms) == 0 {
		return nil
	}
	for i, m := range ms {
		h := &b.out[i].hdr
		b.outIov[i].Base = unsafe.SliceData(m.buf)
		b.outIov[i].SetLen(len(m.buf))
		h.Iov = &b.outIov[i]
		h.SetIovlen(1)
		h.Name = (*byte)(unsafe.Pointer(&b.outName[i]))
		h.Namelen = putSockaddr(&b.outName[i], m.to)
		h.Control, h.Controllen = nil, 0
		if len(m.oob) > 0 {
			h.Control = &m.oob[0]
			h.SetControllen(len(m.oob))
		}
		h.Flags = 0
	}
	b.want, b.sent, b.writeErr = len(ms), 0, 0
	err := b.rc.Write(b.writeFn)
	if err == nil && b.writeErr != 0 {
		err = b.writeErr
	}
	return err
}

func (b *batchIO) send(fd uintptr) bool {
	for b.sent < b.want {
		r, _, errno := unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&b.out[b.sent])), uintptr(b.want-b.sent), 0, 0, 0)
		switch {
		case errno == unix.EAGAIN:
			return false // wait until the socket may be written
		case errno == unix.EINTR:
			continue
		case errno != 0:
			// sendmmsg fails only when its first datagram fails: skip it.
			b.writeErr = errno
			b.sent++
		default:
			b.sent += int(r)
		}
	}
	return true
}
