// Package sockdiag lists and destroys the UDP sockets of a network
// namespace through the kernel's sock_diag netlink interface: the ebpf
// proxy mode's way to move a connected UDP client off an endpoint that
// is gone (what kube-proxy's conntrack flush achieves for NAT).
package sockdiag

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"syscall"

	"golang.org/x/sys/unix"
)

// Socket is one socket as sock_diag names it.
type Socket struct {
	Local, Remote netip.AddrPort
	Cookie        uint64
	ifindex       uint32
	family        uint8
}

// The netlink message types of sock_diag.
const (
	sockDiagByFamily = 20
	sockDestroy      = 21
)

// Sizes of struct inet_diag_req_v2 and struct inet_diag_msg, and where
// each holds its struct inet_diag_sockid.
const (
	reqLen  = 56
	msgLen  = 72
	reqIDAt = 8
	msgIDAt = 4
)

// conn is a NETLINK_SOCK_DIAG socket of the calling thread's network
// namespace.
type conn struct{ fd int }

func open() (*conn, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return nil, fmt.Errorf("sock_diag: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("sock_diag: %w", err)
	}
	return &conn{fd: fd}, nil
}

func (c *conn) close() { unix.Close(c.fd) }

// request builds a netlink message carrying an inet_diag_req_v2.
func request(typ, flags uint16, family uint8, id []byte) []byte {
	b := make([]byte, unix.NLMSG_HDRLEN+reqLen)
	binary.NativeEndian.PutUint32(b[0:], uint32(len(b)))
	binary.NativeEndian.PutUint16(b[4:], typ)
	binary.NativeEndian.PutUint16(b[6:], flags)
	binary.NativeEndian.PutUint32(b[8:], 1) // seq
	r := b[unix.NLMSG_HDRLEN:]
	r[0], r[1] = family, unix.IPPROTO_UDP
	binary.NativeEndian.PutUint32(r[4:], 0xffffffff) // every state
	copy(r[reqIDAt:], id)
	return b
}

// sockID encodes an inet_diag_sockid.
func (s Socket) sockID() []byte {
	id := make([]byte, 48)
	binary.BigEndian.PutUint16(id[0:], s.Local.Port())
	binary.BigEndian.PutUint16(id[2:], s.Remote.Port())
	put := func(at int, a netip.Addr) {
		if a.Is4() {
			v := a.As4()
			copy(id[at:], v[:])
			return
		}
		v := a.As16()
		copy(id[at:], v[:])
	}
	put(4, s.Local.Addr())
	put(20, s.Remote.Addr())
	binary.NativeEndian.PutUint32(id[36:], s.ifindex)
	binary.NativeEndian.PutUint32(id[40:], uint32(s.Cookie))
	binary.NativeEndian.PutUint32(id[44:], uint32(s.Cookie>>32))
	return id
}

func parseID(family uint8, id []byte) Socket {
	addr := func(at int) netip.Addr {
		if family == unix.AF_INET {
			return netip.AddrFrom4([4]byte(id[at : at+4]))
		}
		return netip.AddrFrom16([16]byte(id[at : at+16]))
	}
	return Socket{
		Local:   netip.AddrPortFrom(addr(4), binary.BigEndian.Uint16(id[0:])),
		Remote:  netip.AddrPortFrom(addr(20), binary.BigEndian.Uint16(id[2:])),
		ifindex: binary.NativeEndian.Uint32(id[36:]),
		Cookie:  uint64(binary.NativeEndian.Uint32(id[40:])) | uint64(binary.NativeEndian.Uint32(id[44:]))<<32,
		family:  family,
	}
}

// UDP lists the UDP sockets of family (unix.AF_INET or AF_INET6) in the
// calling thread's network namespace.
func UDP(family uint8) ([]Socket, error) {
	c, err := open()
	if err != nil {
		return nil, err
	}
	defer c.close()
	if err := unix.Sendto(c.fd, request(sockDiagByFamily, unix.NLM_F_REQUEST|unix.NLM_F_DUMP, family, make([]byte, 48)), 0,
		&unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("sock_diag dump: %w", err)
	}
	var out []Socket
	buf := make([]byte, 1<<16)
	for {
		n, _, err := unix.Recvfrom(c.fd, buf, 0)
		if err != nil {
			return nil, fmt.Errorf("sock_diag dump: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			switch m.Header.Type {
			case unix.NLMSG_DONE:
				return out, nil
			case unix.NLMSG_ERROR:
				if len(m.Data) >= 4 {
					if e := int32(binary.NativeEndian.Uint32(m.Data)); e != 0 {
						return nil, fmt.Errorf("sock_diag dump: %w", syscall.Errno(-e))
					}
				}
				return out, nil
			case sockDiagByFamily:
				if len(m.Data) >= msgLen {
					out = append(out, parseID(m.Data[0], m.Data[msgIDAt:msgIDAt+48]))
				}
			}
		}
	}
}

// Destroy destroys s (as UDP returned it): the socket is disconnected,
// its owner's next receive fails with ECONNABORTED (a send, with
// EDESTADDRREQ). A socket gone meanwhile is no error.
func Destroy(s Socket) error {
	c, err := open()
	if err != nil {
		return err
	}
	defer c.close()
	if err := unix.Sendto(c.fd, request(sockDestroy, unix.NLM_F_REQUEST|unix.NLM_F_ACK, s.family, s.sockID()), 0,
		&unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("sock_diag destroy: %w", err)
	}
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(c.fd, buf, 0)
	if err != nil {
		return fmt.Errorf("sock_diag destroy: %w", err)
	}
	msgs, err := syscall.ParseNetlinkMessage(buf[:n])
	if err != nil {
		return err
	}
	for _, m := range msgs {
		if m.Header.Type == unix.NLMSG_ERROR && len(m.Data) >= 4 {
			if e := int32(binary.NativeEndian.Uint32(m.Data)); e != 0 {
				errno := syscall.Errno(-e)
				if errors.Is(errno, unix.ENOENT) {
					return nil
				}
				return fmt.Errorf("sock_diag destroy %s -> %s: %w", s.Local, s.Remote, errno)
			}
		}
	}
	return nil
}

// DestroyInCgroup destroys the UDP sockets that match, in every network
// namespace a process of the cgroup v2 group dir (or of a group below
// it) lives in: a node's pods, for the ebpf mode. It returns how many it
// destroyed.
func DestroyInCgroup(dir string, match func(Socket) bool) (int, error) {
	namespaces, err := namespacesOf(dir)
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, pid := range namespaces {
		k, err := inNetns(pid, func() (int, error) { return destroyMatching(match) })
		n += k
		if err != nil {
			errs = append(errs, err)
		}
	}
	return n, errors.Join(errs...)
}

func destroyMatching(match func(Socket) bool) (int, error) {
	n := 0
	for _, fam := range []uint8{unix.AF_INET, unix.AF_INET6} {
		socks, err := UDP(fam)
		if err != nil {
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EAFNOSUPPORT) {
				continue // no IPv6 (or no udp_diag) in this namespace
			}
			return n, err
		}
		for _, s := range socks {
			if match(s) {
				if err := Destroy(s); err != nil {
					return n, err
				}
				n++
			}
		}
	}
	return n, nil
}
