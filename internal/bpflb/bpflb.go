// Package bpflb loads svcnet's socket-level service load balancer (the
// BPF programs of c/lb.c), attaches them to a cgroup v2 group, and reads
// and writes its maps in Go's types. It knows nothing of Services: the
// ebpf proxy mode (internal/proxy/ebpf) decides what the maps hold.
//
// The programs translate at the socket: a connect (or an unconnected
// send) to a service address gets one of its backends' addresses, chosen
// at random among the service's slots (or the one a ClientIP affinity
// remembers for the client's network namespace); a received datagram's
// source and the peer's name show the service's address again. A
// service entry without backends refuses the connect: ECONNREFUSED
// (Reject) or EPERM (Drop).
package bpflb

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/features"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// Verdict is what a service entry without backends answers.
type Verdict uint8

const (
	// Reject: no endpoint anywhere; the connect fails with ECONNREFUSED,
	// as the rule modes' REJECT makes it.
	Reject Verdict = 1
	// Drop: a Local policy and no endpoint on this node; the connect
	// fails with EPERM (the rule modes drop the packet and the client
	// times out: a program at connect cannot drop, only refuse).
	Drop Verdict = 2
)

// Scope says whom a service entry is for.
type Scope uint8

const (
	// Socket: the connects of the node's own processes (its pods).
	Socket Scope = 0
	// Packet: packets from outside the node (the tc programs).
	Packet Scope = 1
)

// ServiceKey is a service address: where a client connects.
type ServiceKey struct {
	Addr  netip.Addr
	Port  uint16
	Proto uint8 // unix.IPPROTO_TCP, _UDP, _SCTP
	Scope Scope
}

func (k ServiceKey) String() string {
	s := fmt.Sprintf("%s/%s", netip.AddrPortFrom(k.Addr, k.Port), ProtoName(k.Proto))
	if k.Scope == Packet {
		s += " from outside"
	}
	return s
}

// ProtoName is "tcp", "udp" or "sctp".
func ProtoName(p uint8) string {
	switch p {
	case unix.IPPROTO_TCP:
		return "tcp"
	case unix.IPPROTO_UDP:
		return "udp"
	case unix.IPPROTO_SCTP:
		return "sctp"
	}
	return fmt.Sprintf("proto-%d", p)
}

// Service is a service entry: its backends are slots 0..Count-1 of
// generation Gen under ID.
type Service struct {
	ID      uint32
	Count   uint16
	Gen     uint8
	Verdict Verdict // when Count is 0
	// Affinity is the ClientIP affinity timeout in seconds; 0: none.
	Affinity uint32
	Flags    Flags // of a Packet entry
}

// Flags are what a Packet entry asks besides a backend.
type Flags uint32

const (
	// Masquerade: the flow's packets are marked to be masqueraded (the
	// Cluster external policy).
	Masquerade Flags = 1
	// Ranged: only sources in the entry id's ranges (PutRanges) pass.
	Ranged Flags = 2
	// Maglev: a new flow's backend comes from the set's Maglev table
	// (PutMaglev) rather than at random.
	Maglev Flags = 4
)

// MaglevSize is the length of a Maglev table (c/lb.c's MAGLEV_M).
const MaglevSize = 1021

// BackendKey is one backend slot.
type BackendKey struct {
	ID   uint32
	Slot uint16
	Gen  uint8
}

// Stats are an id's counters.
type Stats struct {
	Translated, Refused uint64
}

// Sizes bound the maps.
type Sizes struct {
	// Services is the number of service entries (addresses × ports).
	Services int
	// IDs bounds the ids (backend sets) and their counters.
	IDs int
	// Backends is the number of backend slots of all services.
	Backends int
	// Sockets bounds the translated sockets remembered for replies and
	// peer names (least recently used go first).
	Sockets int
	// Affinities bounds the remembered ClientIP affinities.
	Affinities int
	// Flows bounds the flows from outside the node being translated
	// (least recently used go first), and Ranges the source ranges.
	Flows, Ranges int
	// Maglev bounds the Maglev tables (2 KiB each, made as written).
	Maglev int
}

// Options are what the programs are loaded with besides the sizes.
type Options struct {
	// MasqueradeMark is the packet mark bit that asks the fixed
	// nftables rule to masquerade a flow from outside. Default 0x4000.
	MasqueradeMark uint32
}

// LB is the loaded programs and their maps.
type LB struct {
	objs  lbObjects
	links []link.Link
	sizes Sizes
	// tc are the tc programs' links, by interface index.
	tc map[int][]link.Link
}

// Load loads the programs and makes their maps. It fails, naming what is
// missing, where the kernel lacks a program type, hook or helper the
// programs need.
func Load(s Sizes, o Options) (*LB, error) {
	spec, err := loadLb()
	if err != nil {
		return nil, err
	}
	if o.MasqueradeMark == 0 {
		o.MasqueradeMark = 0x4000
	}
	if err := spec.Variables[lbVarMasqMark].Set(o.MasqueradeMark); err != nil {
		return nil, err
	}
	for name, n := range map[string]int{lbMapServices: s.Services, lbMapBackends: s.Backends,
		lbMapRevnat: s.Sockets, lbMapAffinity: s.Affinities, lbMapStats: s.IDs, lbMapFlows: s.Flows, lbMapRanges: s.Ranges, lbMapMaglev: max(s.Maglev, 1)} {
		if n <= 0 {
			return nil, fmt.Errorf("bpflb: map %s needs a size", name)
		}
		spec.Maps[name].MaxEntries = uint32(n)
	}
	l := &LB{sizes: s, tc: map[int][]link.Link{}}
	if err := spec.LoadAndAssign(&l.objs, nil); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("the kernel refuses svcnet's socket load balancer: %+v", ve)
		}
		return nil, fmt.Errorf("load svcnet's socket load balancer: %w", err)
	}
	return l, nil
}

// Sizes are the maps' bounds.
func (l *LB) Sizes() Sizes { return l.sizes }

// hooks are the programs and where they attach.
func (l *LB) hooks() []struct {
	prog   *ebpf.Program
	attach ebpf.AttachType
} {
	p := &l.objs.lbPrograms
	return []struct {
		prog   *ebpf.Program
		attach ebpf.AttachType
	}{
		{p.Connect4, ebpf.AttachCGroupInet4Connect},
		{p.Sendmsg4, ebpf.AttachCGroupUDP4Sendmsg},
		{p.Recvmsg4, ebpf.AttachCGroupUDP4Recvmsg},
		{p.Getpeername4, ebpf.AttachCgroupInet4GetPeername},
		{p.Connect6, ebpf.AttachCGroupInet6Connect},
		{p.Sendmsg6, ebpf.AttachCGroupUDP6Sendmsg},
		{p.Recvmsg6, ebpf.AttachCGroupUDP6Recvmsg},
		{p.Getpeername6, ebpf.AttachCgroupInet6GetPeername},
	}
}

// CheckCgroup refuses a path that is not a cgroup v2 group, or that is
// the root of its hierarchy: svcnet attaches only to groups of its own,
// never to the machine's root cgroup, where every process of the machine
// would be translated.
func CheckCgroup(path string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return fmt.Errorf("cgroup %s: %w", path, err)
	}
	if st.Type != unix.CGROUP2_SUPER_MAGIC {
		return fmt.Errorf("%s is not a cgroup v2 group", path)
	}
	var parent unix.Statfs_t
	up := filepath.Dir(filepath.Clean(path))
	if err := unix.Statfs(up, &parent); err != nil || parent.Type != unix.CGROUP2_SUPER_MAGIC {
		return fmt.Errorf("%s is the root of its cgroup hierarchy: svcnet attaches only to a group of its own below it", path)
	}
	if !strings.HasPrefix(filepath.Base(filepath.Clean(path)), "svcnet") {
		// Not a rule of the kernel's: a guard against attaching to
		// someone else's group by mistake.
		return fmt.Errorf("cgroup %s: svcnet attaches only to groups named svcnet…", path)
	}
	return nil
}

// Attach attaches every program to the cgroup v2 group at path, with
// links that end when the LB is closed (or the process exits).
func (l *LB) Attach(path string) error {
	if err := CheckCgroup(path); err != nil {
		return err
	}
	for _, h := range l.hooks() {
		lk, err := link.AttachCgroup(link.CgroupOptions{Path: path, Attach: h.attach, Program: h.prog})
		if err != nil {
			return fmt.Errorf("attach %s to %s: %w", h.attach, path, err)
		}
		l.links = append(l.links, lk)
	}
	return nil
}

// Attached reports whether every program is still attached to the group
// at path (a canary: someone may have detached them).
func (l *LB) Attached(path string) (bool, error) {
	cg, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer cg.Close()
	for _, h := range l.hooks() {
		info, err := h.prog.Info()
		if err != nil {
			return false, err
		}
		id, _ := info.ID()
		res, err := link.QueryPrograms(link.QueryOptions{Target: int(cg.Fd()), Attach: h.attach})
		if err != nil {
			return false, fmt.Errorf("query %s programs of %s: %w", h.attach, path, err)
		}
		found := false
		for _, p := range res.Programs {
			if p.ID == id {
				found = true
			}
		}
		if !found {
			return false, nil
		}
	}
	return true, nil
}

// AttachLink attaches the packet programs to the interface with index
// ifindex of the calling thread's network namespace: from_net to its
// ingress, to_net to its egress (tcx links, which end with the LB).
func (l *LB) AttachLink(ifindex int) error {
	if _, ok := l.tc[ifindex]; ok {
		return nil
	}
	in, err := link.AttachTCX(link.TCXOptions{Interface: ifindex, Program: l.objs.FromNet, Attach: ebpf.AttachTCXIngress})
	if err != nil {
		return fmt.Errorf("attach from_net to interface %d: %w", ifindex, err)
	}
	out, err := link.AttachTCX(link.TCXOptions{Interface: ifindex, Program: l.objs.ToNet, Attach: ebpf.AttachTCXEgress})
	if err != nil {
		in.Close()
		return fmt.Errorf("attach to_net to interface %d: %w", ifindex, err)
	}
	l.tc[ifindex] = []link.Link{in, out}
	return nil
}

// DetachLink detaches the packet programs from interface ifindex.
func (l *LB) DetachLink(ifindex int) error {
	var errs []error
	for _, lk := range l.tc[ifindex] {
		errs = append(errs, lk.Close())
	}
	delete(l.tc, ifindex)
	return errors.Join(errs...)
}

// Links are the interfaces the packet programs are attached to.
func (l *LB) Links() []int {
	var out []int
	for i := range l.tc {
		out = append(out, i)
	}
	return out
}

// Close detaches the programs and frees the maps.
func (l *LB) Close() error {
	var errs []error
	for _, lk := range l.links {
		errs = append(errs, lk.Close())
	}
	l.links = nil
	for i := range l.tc {
		errs = append(errs, l.DetachLink(i))
	}
	errs = append(errs, l.objs.Close())
	return errors.Join(errs...)
}

func addr16(a netip.Addr) (b [16]uint8, family uint8) {
	if a.Is4() {
		v := a.As4()
		copy(b[:], v[:])
		return b, 4
	}
	return a.As16(), 6
}

func fromAddr16(b [16]uint8, family uint8) netip.Addr {
	if family == 4 {
		return netip.AddrFrom4([4]byte(b[:4]))
	}
	return netip.AddrFrom16(b)
}

// The maps hold ports in network order.
func hton(p uint16) uint16 { return p<<8 | p>>8 }

func (k ServiceKey) raw() lbSvcKey {
	a, f := addr16(k.Addr)
	return lbSvcKey{Addr: a, Port: hton(k.Port), Proto: k.Proto, Family: f, Scope: uint8(k.Scope)}
}

func (v Service) raw() lbSvcVal {
	return lbSvcVal{Id: v.ID, Count: v.Count, Gen: v.Gen, Verdict: uint8(v.Verdict), Affinity: v.Affinity, Flags: uint32(v.Flags)}
}

func rangeRaw(id uint32, p netip.Prefix) lbRangeKey {
	a, f := addr16(p.Addr())
	return lbRangeKey{Prefixlen: 32 + 8 + uint32(p.Bits()), Id: id, Family: f, Addr: a}
}

// PutMaglev writes the Maglev table of id's generation gen.
func (l *LB) PutMaglev(id uint32, gen uint8, table []uint16) error {
	if len(table) != MaglevSize {
		return fmt.Errorf("bpflb: a Maglev table of %d entries, not %d", len(table), MaglevSize)
	}
	return l.objs.Maglev.Put(lbMaglevKey{Id: id, Gen: gen}, table)
}

// DeleteMaglev deletes the Maglev table of id's generation gen; one
// already gone is no error.
func (l *LB) DeleteMaglev(id uint32, gen uint8) error {
	if err := l.objs.Maglev.Delete(lbMaglevKey{Id: id, Gen: gen}); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return err
	}
	return nil
}

// PutRanges adds id's source ranges.
func (l *LB) PutRanges(id uint32, ranges []netip.Prefix) error {
	for _, p := range ranges {
		if err := l.objs.Ranges.Put(rangeRaw(id, p.Masked()), uint8(1)); err != nil {
			return err
		}
	}
	return nil
}

// DeleteRanges deletes id's source ranges; those already gone are no
// error.
func (l *LB) DeleteRanges(id uint32, ranges []netip.Prefix) error {
	for _, p := range ranges {
		if err := l.objs.Ranges.Delete(rangeRaw(id, p.Masked())); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return err
		}
	}
	return nil
}

func backendRaw(ap netip.AddrPort) lbBackendVal {
	a, f := addr16(ap.Addr())
	return lbBackendVal{Addr: a, Port: hton(ap.Port()), Family: f}
}

// PutServices writes service entries, thousands per system call.
func (l *LB) PutServices(keys []ServiceKey, vals []Service) error {
	const batch = 1 << 14
	for len(keys) > 0 {
		n := min(len(keys), batch)
		rk, rv := make([]lbSvcKey, n), make([]lbSvcVal, n)
		for i := range n {
			rk[i], rv[i] = keys[i].raw(), vals[i].raw()
		}
		if _, err := l.objs.Services.BatchUpdate(rk, rv, nil); err != nil {
			return err
		}
		keys, vals = keys[n:], vals[n:]
	}
	return nil
}

// DeleteServices deletes service entries; those already gone are no
// error.
func (l *LB) DeleteServices(keys []ServiceKey) error {
	for _, k := range keys {
		if err := l.objs.Services.Delete(k.raw()); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return err
		}
	}
	return nil
}

// BackendSet is the slots 0..len(Backends)-1 of ID's generation Gen.
type BackendSet struct {
	ID       uint32
	Gen      uint8
	Backends []netip.AddrPort
}

// PutBackends writes the slots of sets, thousands per system call.
func (l *LB) PutBackends(sets []BackendSet) error {
	const batch = 1 << 14
	total := 0
	for _, s := range sets {
		total += len(s.Backends)
	}
	n := min(total, batch)
	rk, rv := make([]lbBackendKey, 0, n), make([]lbBackendVal, 0, n)
	flush := func() error {
		if len(rk) == 0 {
			return nil
		}
		_, err := l.objs.Backends.BatchUpdate(rk, rv, nil)
		rk, rv = rk[:0], rv[:0]
		return err
	}
	for _, s := range sets {
		for i, ap := range s.Backends {
			rk, rv = append(rk, lbBackendKey{Id: s.ID, Slot: uint16(i), Gen: s.Gen}), append(rv, backendRaw(ap))
			if len(rk) == batch {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	return flush()
}

// DeleteBackends deletes the slots from..to-1 of id's generation gen.
func (l *LB) DeleteBackends(id uint32, gen uint8, from, to int) error {
	for s := from; s < to; s++ {
		err := l.objs.Backends.Delete(lbBackendKey{Id: id, Slot: uint16(s), Gen: gen})
		if err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return err
		}
	}
	return nil
}

// ClearStats zeroes id's counters (an id given to another service).
func (l *LB) ClearStats(id uint32) error {
	return l.objs.Stats.Put(id, lbSvcStats{})
}

// Stats reads id's counters.
func (l *LB) Stats(id uint32) (Stats, error) {
	var c lbSvcStats
	if err := l.objs.Stats.Lookup(id, &c); err != nil {
		return Stats{}, err
	}
	return Stats{Translated: c.Translated, Refused: c.Refused}, nil
}

// Dump is the maps' service and backend entries and source ranges, as
// read from the kernel.
type Dump struct {
	Services map[ServiceKey]Service
	Backends map[BackendKey]netip.AddrPort
	Ranges   map[uint32][]netip.Prefix
}

// Dump reads the service and backend entries.
func (l *LB) Dump() (Dump, error) {
	return dump(l.objs.Services, l.objs.Backends, l.objs.Ranges)
}

func dump(services, backends, ranges *ebpf.Map) (Dump, error) {
	d := Dump{Services: map[ServiceKey]Service{}, Backends: map[BackendKey]netip.AddrPort{}, Ranges: map[uint32][]netip.Prefix{}}
	err := batches(services, func(k lbSvcKey, v lbSvcVal) {
		key := ServiceKey{Addr: fromAddr16(k.Addr, k.Family), Port: hton(k.Port), Proto: k.Proto, Scope: Scope(k.Scope)}
		d.Services[key] = Service{ID: v.Id, Count: v.Count, Gen: v.Gen, Verdict: Verdict(v.Verdict), Affinity: v.Affinity, Flags: Flags(v.Flags)}
	})
	if err != nil {
		return d, err
	}
	err = batches(backends, func(bk lbBackendKey, bv lbBackendVal) {
		d.Backends[BackendKey{ID: bk.Id, Slot: bk.Slot, Gen: bk.Gen}] = netip.AddrPortFrom(fromAddr16(bv.Addr, bv.Family), hton(bv.Port))
	})
	if err != nil {
		return d, err
	}
	var rk lbRangeKey
	var one uint8
	rit := ranges.Iterate()
	for rit.Next(&rk, &one) {
		bits := int(rk.Prefixlen) - 32 - 8
		d.Ranges[rk.Id] = append(d.Ranges[rk.Id], netip.PrefixFrom(fromAddr16(rk.Addr, rk.Family), bits))
	}
	return d, rit.Err()
}

// Cgroup2Mount is where the machine mounts its cgroup v2 hierarchy
// (/sys/fs/cgroup on most machines, /sys/fs/cgroup/unified beside v1
// controllers).
func Cgroup2Mount() (string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		fields, after := strings.Fields(pre), strings.Fields(post)
		if ok && len(fields) >= 5 && len(after) >= 1 && after[0] == "cgroup2" && fields[3] == "/" {
			return fields[4], nil
		}
	}
	return "", errors.New("no cgroup v2 hierarchy is mounted: the ebpf mode attaches its programs to cgroup v2 groups")
}

// batches reads every entry of a hash map, thousands per system call.
func batches[K, V any](m *ebpf.Map, f func(K, V)) error {
	const batch = 4096
	keys, vals := make([]K, batch), make([]V, batch)
	var cursor ebpf.MapBatchCursor
	for {
		n, err := m.BatchLookup(&cursor, keys, vals, nil)
		for i := range n {
			f(keys[i], vals[i])
		}
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil // the end
		}
		if err != nil {
			return err
		}
	}
}

// ForgetUDP forgets the UDP flows from outside translated to one of
// backends (both directions: their next datagram picks a live backend),
// and returns the cookies of the sockets the programs connected to one
// of them: to be destroyed, so that their owners reconnect (what
// kube-proxy's conntrack flush achieves for UDP).
func (l *LB) ForgetUDP(backends []netip.AddrPort) (map[uint64]bool, error) {
	type addrPort struct {
		addr [16]uint8
		port uint16
	}
	gone := map[addrPort]bool{}
	for _, b := range backends {
		a, _ := addr16(b.Addr())
		gone[addrPort{a, hton(b.Port())}] = true
	}
	var stale []lbFlowKey
	err := batches(l.objs.Flows, func(k lbFlowKey, v lbFlowVal) {
		if k.Proto != unix.IPPROTO_UDP {
			return
		}
		if (v.Dir == flowForward && gone[addrPort{v.Addr, v.Port}]) || (v.Dir == flowReply && gone[addrPort{k.Saddr, k.Sport}]) {
			stale = append(stale, k)
		}
	})
	if err != nil {
		return nil, err
	}
	for _, k := range stale {
		if err := l.objs.Flows.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil, err
		}
	}
	cookies := map[uint64]bool{}
	err = batches(l.objs.Revnat, func(k lbRevnatKey, _ lbBackendVal) {
		if gone[addrPort{k.Addr, k.Port}] {
			cookies[k.Cookie] = true
		}
	})
	return cookies, err
}

// The directions of a flow entry (c/lb.c's FLOW_FORWARD, FLOW_REPLY).
const (
	flowForward = 1
	flowReply   = 2
)

// Live are the maps of the programs a running proxy attached to a
// cgroup, found through them: what `svcnet proxy trace` reads.
type Live struct {
	services, backends, ranges *ebpf.Map
}

// OpenAttached finds the maps of svcnet's connect4 program attached to
// the cgroup v2 group at path.
func OpenAttached(path string) (*Live, error) {
	cg, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer cg.Close()
	res, err := link.QueryPrograms(link.QueryOptions{Target: int(cg.Fd()), Attach: ebpf.AttachCGroupInet4Connect})
	if err != nil {
		return nil, fmt.Errorf("programs attached to %s: %w", path, err)
	}
	for _, ap := range res.Programs {
		maps := mapsOf(ap.ID, lbProgConnect4, lbMapServices, lbMapBackends)
		l := &Live{services: maps[lbMapServices], backends: maps[lbMapBackends]}
		if l.services == nil || l.backends == nil {
			l.Close()
			continue
		}
		// The connect programs do not use the source ranges: the tc
		// program on a link of the calling thread's namespace does.
		if l.ranges = rangesOfLinks(); l.ranges == nil {
			l.ranges, err = ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.LPMTrie, KeySize: uint32(binary.Size(lbRangeKey{})), ValueSize: 1, MaxEntries: 1, Flags: unix.BPF_F_NO_PREALLOC})
			if err != nil {
				l.Close()
				return nil, err
			}
		}
		return l, nil
	}
	return nil, fmt.Errorf("no svcnet ebpf programs attached to %s", path)
}

// Dump reads the maps.
func (l *Live) Dump() (Dump, error) { return dump(l.services, l.backends, l.ranges) }

// Close lets go of the maps.
func (l *Live) Close() error {
	var errs []error
	for _, m := range []*ebpf.Map{l.services, l.backends, l.ranges} {
		if m != nil {
			errs = append(errs, m.Close())
		}
	}
	return errors.Join(errs...)
}

// rangesOfLinks finds the ranges map of svcnet's from_net program on a
// link of the calling thread's network namespace; nil if there is none.
func rangesOfLinks() *ebpf.Map {
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil
	}
	for _, ifc := range ifaces {
		res, err := link.QueryPrograms(link.QueryOptions{Target: ifc.Index, Attach: ebpf.AttachTCXIngress})
		if err != nil {
			continue
		}
		for _, ap := range res.Programs {
			if m := mapsOf(ap.ID, lbProgFromNet, lbMapRanges)[lbMapRanges]; m != nil {
				return m
			}
		}
	}
	return nil
}

// mapsOf opens the maps named names of program id, if it is svcnet's
// program prog.
func mapsOf(id ebpf.ProgramID, prog string, names ...string) map[string]*ebpf.Map {
	out := map[string]*ebpf.Map{}
	p, err := ebpf.NewProgramFromID(id)
	if err != nil {
		return out
	}
	info, err := p.Info()
	p.Close()
	if err != nil || info.Name != prog {
		return out
	}
	ids, _ := info.MapIDs()
	for _, mid := range ids {
		m, err := ebpf.NewMapFromID(mid)
		if err != nil {
			continue
		}
		if mi, err := m.Info(); err == nil && slices.Contains(names, mi.Name) {
			out[mi.Name] = m
			continue
		}
		m.Close()
	}
	return out
}

// probe is a kernel feature the programs need, and how to ask for it.
type probe struct {
	what  string
	probe func() error
}

// probes are what the programs need of the kernel, each named as a user
// would look it up.
var probes = []probe{
	{"cgroup socket-address programs (cgroup/connect4 and the other socket hooks)", func() error { return features.HaveProgramType(ebpf.CGroupSockAddr) }},
	{"tc programs (sched_cls)", func() error { return features.HaveProgramType(ebpf.SchedCLS) }},
	{"the helper bpf_set_retval in socket programs (Linux 5.18)", func() error {
		return features.HaveProgramHelper(ebpf.CGroupSockAddr, asm.FnSetRetval)
	}},
	{"the helper bpf_get_netns_cookie in socket programs", func() error {
		return features.HaveProgramHelper(ebpf.CGroupSockAddr, asm.FnGetNetnsCookie)
	}},
	{"LRU hash maps", func() error { return features.HaveMapType(ebpf.LRUHash) }},
	{"LPM trie maps", func() error { return features.HaveMapType(ebpf.LPMTrie) }},
}

// lacking names the first feature of ps the kernel lacks.
func lacking(ps []probe) error {
	for _, p := range ps {
		if err := p.probe(); err != nil {
			if errors.Is(err, ebpf.ErrNotSupported) {
				return fmt.Errorf("this kernel lacks %s", p.what)
			}
			return fmt.Errorf("probe for %s: %w", p.what, err)
		}
	}
	return nil
}

// Check reports whether the kernel runs the programs, naming what it
// lacks if it does not: it probes the program types, helpers and maps
// they need, then loads one socket program and one packet program (the
// verifier's time for those alone), with the smallest maps.
func Check() error {
	if err := lacking(probes); err != nil {
		return err
	}
	spec, err := loadLb()
	if err != nil {
		return err
	}
	for _, m := range spec.Maps {
		if m.MaxEntries > 0 {
			m.MaxEntries = 1
		}
	}
	var objs struct {
		Connect4 *ebpf.Program `ebpf:"connect4"`
		FromNet  *ebpf.Program `ebpf:"from_net"`
	}
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return fmt.Errorf("the kernel refuses svcnet's load balancer: %+v", ve)
		}
		return fmt.Errorf("load svcnet's load balancer: %w", err)
	}
	return errors.Join(objs.Connect4.Close(), objs.FromNet.Close())
}
