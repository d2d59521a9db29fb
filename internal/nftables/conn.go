package nftables

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Conn is a netlink socket to nf_tables in the network namespace it was
// opened in.
type Conn struct {
	mu     sync.Mutex
	fd     int
	sndbuf int
	rcv    []byte
}

// Open opens a netlink socket in the calling thread's network namespace
// (wrap it in netns.Do for another).
func Open() (*Conn, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, fmt.Errorf("nftables: netlink socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("nftables: bind netlink socket: %w", err)
	}
	// Errors without a copy of the (possibly huge) message that failed,
	// but with the kernel's explanation.
	_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_CAP_ACK, 1)
	_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_EXT_ACK, 1)
	// Room for the answers to a big failed batch: one error per message
	// that failed, and the messages after a failure often fail too.
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20)
	return &Conn{fd: fd, rcv: make([]byte, 1<<16)}, nil
}

// Close closes the socket.
func (c *Conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fd < 0 {
		return nil
	}
	err := unix.Close(c.fd)
	c.fd = -1
	return err
}

// Error is a message of a transaction that the kernel refused; the whole
// transaction was then rolled back.
type Error struct {
	Op, Name string
	Errno    syscall.Errno
	Msg      string // the kernel's explanation, if it gave one
}

func (e *Error) Error() string {
	s := fmt.Sprintf("nftables: %s %s: %v", e.Op, e.Name, e.Errno)
	if e.Msg != "" {
		s += " (" + e.Msg + ")"
	}
	return s
}

func (e *Error) Unwrap() error { return e.Errno }

// Run sends the transaction as one batch, which the kernel applies
// atomically, and returns the first error it reported. The batch goes in
// one write however big it is: the kernel only takes a batch whole.
func (c *Conn) Run(t *Tx) error {
	if t.err != nil {
		return t.err
	}
	if len(t.ops) == 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fd < 0 {
		return errors.New("nftables: connection closed")
	}
	// Only the last message asks for an acknowledgement: the kernel
	// answers every failed message anyway, and acknowledging each of
	// hundreds of thousands would overflow the socket.
	flags := binary.NativeEndian.Uint16(t.buf[t.last+6:])
	binary.NativeEndian.PutUint16(t.buf[t.last+6:], flags|unix.NLM_F_ACK)
	defer binary.NativeEndian.PutUint16(t.buf[t.last+6:], flags)

	// The opening message goes into the room NewTx kept for it.
	first := t.buf
	if len(t.full) > 0 {
		first = t.full[0]
	}
	batchMsg(first[:0], unix.NFNL_MSG_BATCH_BEGIN, 0)
	iov := append(slices.Clone(t.full), t.buf, batchMsg(nil, unix.NFNL_MSG_BATCH_END, uint32(len(t.ops)+1)))
	size := t.Bytes() + 2*batchHeader
	if need := size + 4096; need > c.sndbuf {
		if err := unix.SetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, need); err != nil {
			return fmt.Errorf("nftables: socket buffer of %d bytes: %w", need, err)
		}
		c.sndbuf = need
	}
	if _, err := unix.SendmsgBuffers(c.fd, iov, nil, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}, 0); err != nil {
		return fmt.Errorf("nftables: send %d messages (%d bytes): %w", len(t.ops), size, err)
	}
	return c.answers(t)
}

func batchMsg(b []byte, typ uint16, seq uint32) []byte {
	b = binary.NativeEndian.AppendUint32(b, unix.NLMSG_HDRLEN+4)
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = binary.NativeEndian.AppendUint16(b, unix.NLM_F_REQUEST)
	b = binary.NativeEndian.AppendUint32(b, seq)
	b = binary.NativeEndian.AppendUint32(b, 0)
	b = append(b, unix.AF_UNSPEC, unix.NFNETLINK_V0)
	return binary.BigEndian.AppendUint16(b, unix.NFNL_SUBSYS_NFTABLES)
}

// answers reads the kernel's answers to a batch up to the last
// message's. The kernel handles a batch while it is being sent, so every
// answer is queued by now: reading never waits.
func (c *Conn) answers(t *Tx) error {
	last := uint32(len(t.ops))
	var first error
	for {
		n, _, err := unix.Recvfrom(c.fd, c.rcv, unix.MSG_DONTWAIT)
		if err != nil {
			if first != nil {
				return first
			}
			if errors.Is(err, unix.EAGAIN) {
				return fmt.Errorf("nftables: no answer to the last of %d messages", len(t.ops))
			}
			return fmt.Errorf("nftables: reading the answer to %d messages: %w", len(t.ops), err)
		}
		msgs, err := syscall.ParseNetlinkMessage(c.rcv[:n])
		if err != nil {
			return fmt.Errorf("nftables: bad answer: %w", err)
		}
		for _, m := range msgs {
			if m.Header.Type != unix.NLMSG_ERROR || len(m.Data) < 4 {
				continue
			}
			code := int32(binary.NativeEndian.Uint32(m.Data))
			seq := uint32(0)
			if len(m.Data) >= 4+unix.NLMSG_HDRLEN {
				seq = binary.NativeEndian.Uint32(m.Data[4+8:])
			}
			if code != 0 && first == nil {
				e := &Error{Op: "message", Name: fmt.Sprint(seq), Errno: syscall.Errno(-code), Msg: extAckMsg(m)}
				if seq >= 1 && int(seq) <= len(t.ops) {
					e.Op, e.Name = t.ops[seq-1].kind, t.ops[seq-1].name
				}
				first = e
			}
			if seq == last {
				return first
			}
		}
	}
}

// extAckMsg is the text of an extended acknowledgement (NLMSGERR_ATTR_MSG),
// if there is one: it follows the error code and the failed message's
// header (NETLINK_CAP_ACK leaves out its payload).
func extAckMsg(m syscall.NetlinkMessage) string {
	if m.Header.Flags&unix.NLM_F_ACK_TLVS == 0 || len(m.Data) < 4+unix.NLMSG_HDRLEN {
		return ""
	}
	b := m.Data[4+unix.NLMSG_HDRLEN:]
	for len(b) >= 4 {
		l := int(binary.NativeEndian.Uint16(b))
		typ := binary.NativeEndian.Uint16(b[2:])
		if l < 4 || l > len(b) {
			return ""
		}
		if typ == unix.NLMSGERR_ATTR_MSG {
			s := b[4:l]
			for len(s) > 0 && s[len(s)-1] == 0 {
				s = s[:len(s)-1]
			}
			return string(s)
		}
		b = b[(l+3)&^3:]
	}
	return ""
}
