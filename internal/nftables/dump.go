package nftables

import (
	"encoding/binary"
	"fmt"
	"slices"
	"syscall"

	"golang.org/x/sys/unix"
)

// dumpSocket opens a netlink socket for dumps in the calling thread's
// network namespace.
func dumpSocket() (int, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
	if err != nil {
		return -1, err
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// dump lists one kind of object of a table (NFT_MSG_GET* with
// NLM_F_DUMP) over fd and returns each object's attributes.
func dump(fd int, f Family, typ uint16, table string, extra ...attr) ([][]byte, error) {
	t := NewTx(f, table)
	m := t.msg(typ, unix.NLM_F_DUMP, "dump", table)
	t.str(1, table) // the TABLE attribute is 1 for every object kind
	for _, a := range extra {
		t.attr(a.typ, a.data)
	}
	t.end(m)
	if err := unix.Sendto(fd, t.buf[batchHeader:], 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, err
	}
	var out [][]byte
	buf := make([]byte, 1<<20)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return nil, err
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
					if code := int32(binary.NativeEndian.Uint32(m.Data)); code != 0 {
						return nil, syscall.Errno(-code)
					}
				}
				return out, nil
			}
			if len(m.Data) < 4 {
				return nil, fmt.Errorf("short message")
			}
			out = append(out, slices.Clone(m.Data[4:])) // after the nfgenmsg; buf is reused
		}
	}
}

type attr struct {
	typ  uint16
	data []byte
}

// attrs splits a message's attributes.
func attrs(b []byte) []attr {
	var out []attr
	for len(b) >= 4 {
		l := int(binary.NativeEndian.Uint16(b))
		if l < 4 || l > len(b) {
			break
		}
		out = append(out, attr{binary.NativeEndian.Uint16(b[2:]) &^ (unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER), b[4:l]})
		b = b[min((l+3)&^3, len(b)):]
	}
	return out
}

func cstring(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

func be32(b []byte) uint32 {
	if len(b) < 4 {
		return 0
	}
	return binary.BigEndian.Uint32(b)
}
