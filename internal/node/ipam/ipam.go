// Package ipam hands out a node's pod addresses the way CNI's host-local
// plugin does: each allocation is a file named by the address holding the
// owner's id, and the next address is the first free one after the last
// handed out, wrapping at the end of the range. A freed address is
// therefore not given again until every other one has been used, so the
// neighbour tables and conntrack entries that still name a deleted pod's
// address have long expired by the time a new pod gets it.
package ipam

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// lastFile remembers the last address handed out (host-local's
// last_reserved_ip.0), so a restarted agent continues after it.
const lastFile = "last_reserved_ip.0"

// ErrFull is returned when every address of the range is taken.
var ErrFull = errors.New("no pod addresses left on this node")

// Allocator is one node's pod address range, kept in Dir.
type Allocator struct {
	CIDR    netip.Prefix // the node's pod CIDR
	Gateway netip.Addr   // never handed out (the pod bridge's address)
	Dir     string

	mu sync.Mutex
}

// Allocate gives owner an address: the one it already holds, else the
// first free one after the last handed out.
func (a *Allocator) Allocate(owner string) (netip.Addr, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := os.MkdirAll(a.Dir, 0o755); err != nil {
		return netip.Addr{}, err
	}
	held, err := a.read()
	if err != nil {
		return netip.Addr{}, err
	}
	used := make(map[netip.Addr]bool, len(held))
	for addr, o := range held {
		if o == owner {
			return addr, nil
		}
		used[addr] = true
	}
	last, _ := a.last()
	addr, ok := Next(a.CIDR, a.Gateway, last, used)
	if !ok {
		return netip.Addr{}, ErrFull
	}
	// O_EXCL: two agents on one directory (a restart racing its
	// predecessor's exit) never hand out the same address.
	f, err := os.OpenFile(filepath.Join(a.Dir, addr.String()), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("reserve %s: %w", addr, err)
	}
	_, werr := f.WriteString(owner)
	if err := errors.Join(werr, f.Close()); err != nil {
		_ = os.Remove(f.Name())
		return netip.Addr{}, fmt.Errorf("reserve %s: %w", addr, err)
	}
	if err := os.WriteFile(filepath.Join(a.Dir, lastFile), []byte(addr.String()), 0o644); err != nil {
		return netip.Addr{}, err
	}
	return addr, nil
}

// Release frees every address owner holds and returns them.
func (a *Allocator) Release(owner string) []netip.Addr {
	a.mu.Lock()
	defer a.mu.Unlock()
	held, _ := a.read()
	var freed []netip.Addr
	for addr, o := range held {
		if o == owner {
			if os.Remove(filepath.Join(a.Dir, addr.String())) == nil {
				freed = append(freed, addr)
			}
		}
	}
	return freed
}

// Owners lists who holds addresses (to clean up after a restart the
// pods that no longer exist).
func (a *Allocator) Owners() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	held, _ := a.read()
	var out []string
	for _, o := range held {
		out = append(out, o)
	}
	return out
}

// SetLast makes the next allocation start after addr, as if addr had just
// been handed out. Tests use it to force an address to be reused.
func (a *Allocator) SetLast(addr netip.Addr) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := os.MkdirAll(a.Dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(a.Dir, lastFile), []byte(addr.String()), 0o644)
}

func (a *Allocator) read() (map[netip.Addr]string, error) {
	entries, err := os.ReadDir(a.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	held := map[netip.Addr]string{}
	for _, e := range entries {
		addr, err := netip.ParseAddr(e.Name())
		if err != nil {
			continue // last_reserved_ip.0 and strangers
		}
		owner, err := os.ReadFile(filepath.Join(a.Dir, e.Name()))
		if err != nil {
			continue
		}
		held[addr] = strings.TrimSpace(string(owner))
	}
	return held, nil
}

func (a *Allocator) last() (netip.Addr, bool) {
	data, err := os.ReadFile(filepath.Join(a.Dir, lastFile))
	if err != nil {
		return netip.Addr{}, false
	}
	addr, err := netip.ParseAddr(strings.TrimSpace(string(data)))
	return addr, err == nil
}

// Next is the first address of cidr after last that is neither used, the
// gateway, the network address nor the broadcast address, wrapping at
// the end of the range; with no valid last it starts at the beginning.
func Next(cidr netip.Prefix, gateway, last netip.Addr, used map[netip.Addr]bool) (netip.Addr, bool) {
	cidr = cidr.Masked()
	first, end := cidr.Addr().Next(), broadcast(cidr)
	usable := func(a netip.Addr) bool { return a != gateway && !used[a] }
	start := first
	if last.IsValid() && cidr.Contains(last) {
		start = last.Next()
	}
	// Two passes at most: from start to the end, then from the beginning.
	for a := start; a.IsValid() && a.Less(end); a = a.Next() {
		if usable(a) {
			return a, true
		}
	}
	for a := first; a.IsValid() && a.Less(start) && a.Less(end); a = a.Next() {
		if usable(a) {
			return a, true
		}
	}
	return netip.Addr{}, false
}

func broadcast(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v |= (1 << (32 - p.Bits())) - 1
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}
