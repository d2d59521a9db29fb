package iptables

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"
)

// genMonitor tells when an iptables-restore's transactions are in the
// kernel, from nf_tables' own notifications (what `nft monitor` shows):
// after each commit the kernel announces the new ruleset generation with
// the pid of the process that made it.
//
// Why not just wait for iptables-restore to exit: with the nft backend,
// closing its netlink socket waits for the kernel to free the rules the
// transaction replaced, an RCU grace period after the commit, during
// which the new rules are already in effect: a large share of a small
// change's time (docs/benchmarks.md).
type genMonitor struct {
	mu  sync.Mutex
	fd  int
	buf []byte
}

// Netlink constants of nfnetlink and nf_tables (linux/netfilter/*.h).
const (
	netlinkNetfilter   = 12
	nfnlgrpNFTables    = 7
	nfnlSubsysNFTables = 10
	nftMsgNewGen       = 15
	nftaGenProcPID     = 2
	solNetlink         = 270
	netlinkAddMember   = 1
	netlinkDropMember  = 2
)

// errGenUnknown means the notifications cannot say: some were dropped.
var errGenUnknown = errors.New("nf_tables notifications lost")

// newGenMonitor opens the notification socket in the network namespace of
// the calling thread. It stays open for the life of the process: closing
// a netfilter socket is what waits for the grace period.
func newGenMonitor() (*genMonitor, error) {
	fd, err := syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_RAW|syscall.SOCK_CLOEXEC, netlinkNetfilter)
	if err != nil {
		return nil, fmt.Errorf("nf_tables notifications: %w", err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("nf_tables notifications: %w", err)
	}
	_ = syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_RCVBUF, 1<<20)
	// Short receive timeouts let a wait notice that the process exited.
	tv := syscall.NsecToTimeval((10 * time.Millisecond).Nanoseconds())
	if err := syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	return &genMonitor{fd: fd, buf: make([]byte, 1<<16)}, nil
}

// subscribe joins the nf_tables group and drops anything an earlier
// subscription left unread. While subscribed, the kernel describes every
// object each commit changes, so only small restores are watched.
func (m *genMonitor) subscribe() error {
	if err := syscall.SetsockoptInt(m.fd, solNetlink, netlinkAddMember, nfnlgrpNFTables); err != nil {
		return fmt.Errorf("subscribe to nf_tables notifications: %w", err)
	}
	for {
		_, _, err := syscall.Recvfrom(m.fd, m.buf, syscall.MSG_DONTWAIT)
		if err != nil && !errors.Is(err, syscall.ENOBUFS) {
			return nil
		}
	}
}

func (m *genMonitor) unsubscribe() {
	_ = syscall.SetsockoptInt(m.fd, solNetlink, netlinkDropMember, nfnlgrpNFTables)
}

// wait returns nil once pid has committed n transactions, errGenUnknown if
// notifications were lost, or stop's error as soon as stop returns one
// (checked between reads: the process exited, the context ended).
func (m *genMonitor) wait(pid, n int, stop func() error) error {
	for n > 0 {
		if err := stop(); err != nil {
			return err
		}
		k, _, err := syscall.Recvfrom(m.fd, m.buf, 0)
		switch {
		case errors.Is(err, syscall.ENOBUFS):
			return errGenUnknown
		case errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EINTR):
			continue
		case err != nil:
			return fmt.Errorf("read nf_tables notifications: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(m.buf[:k])
		if err != nil {
			continue
		}
		for _, msg := range msgs {
			if msg.Header.Type == nfnlSubsysNFTables<<8|nftMsgNewGen && len(msg.Data) > 4 && genPID(msg.Data[4:]) == pid {
				n--
			}
		}
	}
	return nil
}

// genPID returns the NFTA_GEN_PROC_PID attribute of a NEWGEN message.
func genPID(attrs []byte) int {
	for len(attrs) >= 4 {
		l := int(binary.NativeEndian.Uint16(attrs))
		if l < 4 || l > len(attrs) {
			return 0
		}
		if binary.NativeEndian.Uint16(attrs[2:])&0x3fff == nftaGenProcPID && l >= 8 {
			return int(binary.BigEndian.Uint32(attrs[4:8]))
		}
		next := (l + 3) &^ 3
		if next >= len(attrs) {
			return 0
		}
		attrs = attrs[next:]
	}
	return 0
}
