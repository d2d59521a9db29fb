// Package nfacct creates and reads the kernel's named packet counters
// (nfnetlink_acct), which iptables rules count into with
// `-m nfacct --nfacct-name NAME`. kube-proxy's iptables mode counts the
// packets it drops as conntrack-invalid this way, and so does svcnet's.
// Counters live in the calling thread's network namespace.
package nfacct

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// MaxNameLen is the longest counter name the kernel takes
// (NFACCT_NAME_MAX less its terminating zero).
const MaxNameLen = 31

// The nfnetlink_acct subsystem, its commands and attributes
// (linux/netfilter/nfnetlink_acct.h).
const (
	subsysAcct = 7
	cmdNew     = 0
	cmdGet     = 1
	attrName   = 1
	attrPkts   = 2
	attrBytes  = 3
)

// ErrNotFound: no counter of that name.
var ErrNotFound = errors.New("nfacct: no such counter")

// nfgenmsg is the header of every nfnetlink message.
type nfgenmsg struct{}

func (nfgenmsg) Len() int { return 4 }

// Serialize: family AF_UNSPEC, version NFNETLINK_V0, resource id 0.
func (nfgenmsg) Serialize() []byte { return []byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, 0} }

func request(cmd, flags int, name string) (*nl.NetlinkRequest, error) {
	if name == "" || len(name) > MaxNameLen {
		return nil, fmt.Errorf("nfacct: counter name %q: 1 to %d bytes", name, MaxNameLen)
	}
	req := nl.NewNetlinkRequest(subsysAcct<<8|cmd, flags)
	req.AddData(nfgenmsg{})
	req.AddData(nl.NewRtAttr(attrName, nl.ZeroTerminated(name)))
	return req, nil
}

// Ensure creates the counter unless it exists.
func Ensure(name string) error {
	if _, _, err := Get(name); !errors.Is(err, ErrNotFound) {
		return err
	}
	req, err := request(cmdNew, unix.NLM_F_CREATE|unix.NLM_F_ACK, name)
	if err != nil {
		return err
	}
	if _, err := req.Execute(unix.NETLINK_NETFILTER, 0); err != nil && !errors.Is(err, syscall.EEXIST) {
		return fmt.Errorf("nfacct: create %s: %w", name, err)
	}
	return nil
}

// Get returns a counter's packets and bytes.
func Get(name string) (packets, bytes uint64, err error) {
	req, err := request(cmdGet, unix.NLM_F_ACK, name)
	if err != nil {
		return 0, 0, err
	}
	msgs, err := req.Execute(unix.NETLINK_NETFILTER, 0)
	if errors.Is(err, syscall.ENOENT) {
		return 0, 0, fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("nfacct: get %s: %w", name, err)
	}
	for _, m := range msgs {
		if len(m) < 4 {
			continue
		}
		attrs, err := nl.ParseRouteAttr(m[4:])
		if err != nil {
			return 0, 0, fmt.Errorf("nfacct: get %s: %w", name, err)
		}
		for _, a := range attrs {
			switch {
			case a.Attr.Type == attrPkts && len(a.Value) == 8:
				packets = binary.BigEndian.Uint64(a.Value)
			case a.Attr.Type == attrBytes && len(a.Value) == 8:
				bytes = binary.BigEndian.Uint64(a.Value)
			}
		}
		return packets, bytes, nil
	}
	return 0, 0, fmt.Errorf("%w: %s", ErrNotFound, name)
}
