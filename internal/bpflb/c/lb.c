// svcnet's service load balancer. At the socket: cgroup v2 programs
// that give a socket of a pod (or of a node process in svcnet's cgroups)
// the address of one of a Service's endpoints when it connects to, or
// sends a datagram to, the Service's address; and that show the
// Service's address again where the socket would see the endpoint's (the
// source of a datagram received, the peer's name). At the packet: tc
// programs on the node's links for clients outside the node (node ports,
// external and load-balancer addresses), which translate each flow's
// packets to the endpoint its first packet chose, mark those to
// masquerade (a fixed nftables rule does it) and translate the replies
// back.
//
// The maps are written by svcnet's proxy (internal/proxy/ebpf), which
// keeps these invariants:
//   - services maps an address, port and protocol to a service port's
//     id, its generation and its backend count;
//   - backends holds slots 0..count-1 of that id and generation. A change
//     writes the other generation's slots first, then the service entry,
//     then deletes the old generation's slots: a program sees either the
//     whole old or the whole new backend set. A program that finds a
//     slot gone (the entry changed between its two lookups) looks the
//     service up once more.

//go:build ignore

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define AF_INET 2
#define AF_INET6 10
#define EPERM 1
#define ECONNREFUSED 111

// Verdicts of a service entry without backends.
#define SVC_REJECT 1 // no endpoint anywhere: ECONNREFUSED, as REJECT
#define SVC_DROP 2   // Local policy, none on this node: EPERM

// Who a service entry is for: the node's sockets, or packets from
// outside the node (another policy, source ranges, masquerading).
#define SCOPE_SOCKET 0
#define SCOPE_PACKET 1

struct svc_key {
	__u8 addr[16]; // IPv4 in the first four bytes, the rest zero
	__u16 port;    // network order
	__u8 proto;    // IPPROTO_*
	__u8 family;   // 4 or 6
	__u8 scope;
	__u8 pad[3];
};

// Flags of a packet-scope entry.
#define SVC_MASQ 1   // masquerade the flow (the Cluster external policy)
#define SVC_RANGED 2 // only sources in the entry's ranges (LPM map ranges)
#define SVC_MAGLEV 4 // a new flow's backend from the set's Maglev table

struct svc_val {
	__u32 id;
	__u16 count; // backends, in slots 0..count-1 of generation gen
	__u8 gen;
	__u8 verdict; // when count is 0
	__u32 affinity; // ClientIP affinity timeout in seconds, 0: none
	__u32 flags;
};

struct backend_key {
	__u32 id;
	__u16 slot;
	__u8 gen;
	__u8 pad;
};

struct backend_val {
	__u8 addr[16];
	__u16 port; // network order
	__u8 family; // 4 or 6
	__u8 pad;
};

// A translated socket's peer: by socket cookie and the endpoint's
// address, the service's.
struct revnat_key {
	__u64 cookie;
	__u8 addr[16];
	__u16 port;
	__u16 pad[3];
};

// A client, for ClientIP affinity: a socket's network namespace (its
// pod), or a packet's source address.
struct affinity_key {
	__u8 addr[16];
	__u64 netns;
	__u32 id;
	__u32 pad;
};

struct affinity_val {
	__u64 at; // last use, bpf_ktime_get_ns
	struct backend_val backend;
};

// Per id, connections (and datagrams sent unconnected) the programs
// translated, and those refused for want of an endpoint. One array for
// all CPUs, added to atomically: a per-CPU one would cost its size once
// per CPU of the machine.
struct svc_stats {
	__u64 translated;
	__u64 refused;
};

// Sizes are set by the loader before the maps are made.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, struct svc_key);
	__type(value, struct svc_val);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} services SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, struct backend_key);
	__type(value, struct backend_val);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} backends SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1);
	__type(key, struct revnat_key);
	__type(value, struct backend_val);
} revnat SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1);
	__type(key, struct affinity_key);
	__type(value, struct affinity_val);
} affinity SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct svc_stats);
} stats SEC(".maps");

static __always_inline void count(__u32 id, int refused)
{
	struct svc_stats *s = bpf_map_lookup_elem(&stats, &id);
	if (!s)
		return;
	if (refused)
		__sync_fetch_and_add(&s->refused, 1);
	else
		__sync_fetch_and_add(&s->translated, 1);
}

static __always_inline int same_backend(const struct backend_val *a, const struct backend_val *b)
{
	const __u64 *x = (const __u64 *)a->addr, *y = (const __u64 *)b->addr;
	return x[0] == y[0] && x[1] == y[1] && a->port == b->port;
}

// pick chooses a backend of the service at key, whose entry the caller
// has looked up (svc), into out. It returns 0, with *found set when out
// holds a backend (unset: the entry went meanwhile), or the errno the
// caller should fail with. ak holds the client; *flags gets the entry's.
static __always_inline int pick(struct svc_key *key, struct svc_val *svc, struct affinity_key *ak, struct backend_val *out,
				int *found, __u32 *flags)
{
	*found = 0;
	for (int attempt = 0; attempt < 2; attempt++) {
		if (attempt > 0)
			svc = bpf_map_lookup_elem(&services, key);
		if (!svc)
			return 0;
		__u32 id = svc->id;
		*flags = svc->flags;
		if (svc->count == 0) {
			count(id, 1);
			return svc->verdict == SVC_DROP ? EPERM : ECONNREFUSED;
		}
		__u64 now = 0;
		if (svc->affinity) {
			ak->id = id;
			now = bpf_ktime_get_ns();
			struct affinity_val *av = bpf_map_lookup_elem(&affinity, ak);
			if (av && now - av->at <= (__u64)svc->affinity * 1000000000ULL) {
				// Still one of the backends? Only then does it stick.
				struct backend_key bk = {.id = id, .gen = svc->gen};
				for (__u16 i = 0; i < 256 && i < svc->count; i++) {
					bk.slot = i;
					struct backend_val *b = bpf_map_lookup_elem(&backends, &bk);
					if (b && same_backend(b, &av->backend)) {
						*out = *b;
						*found = 1;
						av->at = now;
						count(id, 0);
						return 0;
					}
				}
			}
		}
		struct backend_key bk = {.id = id, .gen = svc->gen, .slot = bpf_get_prandom_u32() % svc->count};
		struct backend_val *b = bpf_map_lookup_elem(&backends, &bk);
		if (!b)
			continue; // the service changed between the lookups
		*out = *b;
		*found = 1;
		if (svc->affinity) {
			struct affinity_val av = {.at = now, .backend = *b};
			bpf_map_update_elem(&affinity, ak, &av, BPF_ANY);
		}
		count(id, 0);
		return 0;
	}
	// Changed under us twice: refuse rather than connect to the
	// service's address itself, which no one serves.
	return ECONNREFUSED;
}

static __always_inline void remember(void *ctx, const struct backend_val *b, const struct backend_val *svc)
{
	struct revnat_key rk = {.cookie = bpf_get_socket_cookie(ctx), .port = b->port};
	__builtin_memcpy(rk.addr, b->addr, 16);
	bpf_map_update_elem(&revnat, &rk, svc, BPF_ANY);
}

// A dual-stack socket reaches IPv4 addresses as IPv4-mapped IPv6 ones
// (::ffff:a.b.c.d): its hooks are the IPv6 ones, its services the IPv4
// entries.
static __always_inline int v4mapped(const __u32 *a)
{
	return a[0] == 0 && a[1] == 0 && a[2] == bpf_htonl(0xffff);
}

// load reads ctx's address (of an IPv6 hook when v6) into addr, as the
// maps key it (an IPv4-mapped one as the IPv4 address), and returns its
// family.
static __always_inline __u8 load(struct bpf_sock_addr *ctx, int v6, __u8 *addr)
{
	__u32 *a = (__u32 *)addr;
	if (!v6) {
		a[0] = ctx->user_ip4;
		return 4;
	}
	a[0] = ctx->user_ip6[0];
	a[1] = ctx->user_ip6[1];
	a[2] = ctx->user_ip6[2];
	a[3] = ctx->user_ip6[3];
	if (!v4mapped(a))
		return 6;
	a[0] = a[3];
	a[1] = a[2] = a[3] = 0;
	return 4;
}

// store writes addr of family into ctx's address (of an IPv6 hook when
// v6: an IPv4 one as IPv4-mapped).
static __always_inline void store(struct bpf_sock_addr *ctx, int v6, const __u8 *addr, __u8 family)
{
	const __u32 *a = (const __u32 *)addr;
	if (!v6) {
		ctx->user_ip4 = a[0];
		return;
	}
	if (family == 4) {
		ctx->user_ip6[0] = 0;
		ctx->user_ip6[1] = 0;
		ctx->user_ip6[2] = bpf_htonl(0xffff);
		ctx->user_ip6[3] = a[0];
		return;
	}
	ctx->user_ip6[0] = a[0];
	ctx->user_ip6[1] = a[1];
	ctx->user_ip6[2] = a[2];
	ctx->user_ip6[3] = a[3];
}

// translate gives a connect (or an unconnected send) to a service's
// address one of its backends', and remembers the service's for the
// socket's replies and peer name.
static __always_inline int translate(struct bpf_sock_addr *ctx, int v6)
{
	struct svc_key key = {.port = ctx->user_port, .proto = ctx->protocol};
	key.family = load(ctx, v6, key.addr);
	struct svc_val *entry = bpf_map_lookup_elem(&services, &key);
	if (!entry)
		return 1; // not a service's address: most connects end here
	struct affinity_key ak = {};
	if (entry->affinity)
		ak.netns = bpf_get_netns_cookie(ctx);
	struct backend_val b;
	int found;
	__u32 flags;
	int err = pick(&key, entry, &ak, &b, &found, &flags);
	if (err) {
		bpf_set_retval(-err);
		return 0;
	}
	if (!found)
		return 1;
	struct backend_val svc = {.port = key.port, .family = key.family};
	__builtin_memcpy(svc.addr, key.addr, 16);
	store(ctx, v6, b.addr, b.family);
	ctx->user_port = b.port;
	remember(ctx, &b, &svc);
	return 1;
}

// untranslate shows the service's address where the socket sees the
// endpoint's: the source of a datagram received, the peer's name.
static __always_inline int untranslate(struct bpf_sock_addr *ctx, int v6)
{
	struct revnat_key rk = {.cookie = bpf_get_socket_cookie(ctx), .port = ctx->user_port};
	load(ctx, v6, rk.addr);
	struct backend_val *svc = bpf_map_lookup_elem(&revnat, &rk);
	if (!svc)
		return 1;
	store(ctx, v6, svc->addr, svc->family);
	ctx->user_port = svc->port;
	return 1;
}

SEC("cgroup/connect4")
int connect4(struct bpf_sock_addr *ctx) { return translate(ctx, 0); }

SEC("cgroup/sendmsg4")
int sendmsg4(struct bpf_sock_addr *ctx) { return translate(ctx, 0); }

SEC("cgroup/recvmsg4")
int recvmsg4(struct bpf_sock_addr *ctx) { return untranslate(ctx, 0); }

SEC("cgroup/getpeername4")
int getpeername4(struct bpf_sock_addr *ctx) { return untranslate(ctx, 0); }

SEC("cgroup/connect6")
int connect6(struct bpf_sock_addr *ctx) { return translate(ctx, 1); }

SEC("cgroup/sendmsg6")
int sendmsg6(struct bpf_sock_addr *ctx) { return translate(ctx, 1); }

SEC("cgroup/recvmsg6")
int recvmsg6(struct bpf_sock_addr *ctx) { return untranslate(ctx, 1); }

SEC("cgroup/getpeername6")
int getpeername6(struct bpf_sock_addr *ctx) { return untranslate(ctx, 1); }


// ---- The packet path: clients outside the node ----

// The mark bit that asks the fixed nftables rule to masquerade; set by
// the loader.
volatile const __u32 masq_mark = 0x4000;

// A flow, as the packets of one direction carry it.
struct flow_key {
	__u8 saddr[16];
	__u8 daddr[16];
	__u16 sport;
	__u16 dport;
	__u8 proto;
	__u8 family;
	__u16 pad;
};

#define FLOW_FORWARD 1 // a client's packets: to the backend
#define FLOW_REPLY 2   // the backend's replies: from the service's address

struct flow_val {
	__u8 addr[16]; // the backend (forward) or the service's address (reply)
	__u16 port;
	__u8 dir;
	__u8 masq;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1);
	__type(key, struct flow_key);
	__type(value, struct flow_val);
} flows SEC(".maps");

// Source ranges of load-balancer addresses: an entry's id and a prefix
// of the source.
struct range_key {
	__u32 prefixlen; // 32 (the id) + 8 (the family) + the prefix's length
	__u32 id;
	__u8 family;
	__u8 addr[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 1);
	__type(key, struct range_key);
	__type(value, __u8);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} ranges SEC(".maps");

// Maglev lookup tables, per backend set and generation: entry i holds
// the slot of the backend a flow hashing to i goes to. The proxy writes
// a generation's table with its slots, before the entries switch.
#define MAGLEV_M 1021

struct maglev_key {
	__u32 id;
	__u8 gen;
	__u8 pad[3];
};

struct maglev_val {
	__u16 slot[MAGLEV_M];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, struct maglev_key);
	__type(value, struct maglev_val);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} maglev SEC(".maps");

// flow_hash hashes a flow's addresses, ports and protocol (FNV-1a): the
// same on every node, so that a flow spread over several nodes (ECMP)
// meets the same backend on each.
static __always_inline __u32 flow_hash(const struct flow_key *f)
{
	const __u8 *b = (const __u8 *)f;
	__u32 h = 2166136261u;
	for (int i = 0; i < (int)__builtin_offsetof(struct flow_key, pad); i++) {
		h ^= b[i];
		h *= 16777619u;
	}
	return h;
}

// maglev_pick chooses the backend of a new flow from the set's Maglev
// table; 0 when out holds it.
static __always_inline int maglev_pick(const struct svc_val *svc, const struct flow_key *f, struct backend_val *out)
{
	if (svc->count == 0)
		return -1;
	struct maglev_key mk = {.id = svc->id, .gen = svc->gen};
	struct maglev_val *mv = bpf_map_lookup_elem(&maglev, &mk);
	if (!mv)
		return -1;
	__u32 i = flow_hash(f) % MAGLEV_M;
	// Opaque to clang, so that the bound stays for the verifier.
	asm volatile("" : "+r"(i));
	if (i >= MAGLEV_M)
		return -1;
	__u16 slot = mv->slot[i];
	if (slot >= svc->count)
		return -1;
	struct backend_key bk = {.id = svc->id, .gen = svc->gen, .slot = slot};
	struct backend_val *b = bpf_map_lookup_elem(&backends, &bk);
	if (!b)
		return -1;
	*out = *b;
	count(svc->id, 0);
	return 0;
}

// A parsed packet: where its addresses, ports and checksum are.
struct pkt {
	struct flow_key f;
	__u32 l3;      // offset of the IP header
	__u32 l4;      // offset of the TCP or UDP header
	__u32 csum;    // offset of the L4 checksum
	__u8 syn_only; // TCP with SYN and without ACK: a new connection
};

static __always_inline int parse(struct __sk_buff *skb, struct pkt *p)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > end)
		return 0;
	p->l3 = sizeof(*eth);
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);
		if ((void *)(ip + 1) > end || ip->ihl < 5)
			return 0;
		if (ip->frag_off & bpf_htons(0x3fff))
			return 0; // fragments: not translated
		p->f.family = 4;
		p->f.proto = ip->protocol;
		__builtin_memcpy(p->f.saddr, &ip->saddr, 4);
		__builtin_memcpy(p->f.daddr, &ip->daddr, 4);
		p->l4 = p->l3 + ip->ihl * 4;
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		if ((void *)(ip6 + 1) > end)
			return 0;
		p->f.family = 6;
		p->f.proto = ip6->nexthdr; // no extension headers: else not translated
		__builtin_memcpy(p->f.saddr, &ip6->saddr, 16);
		__builtin_memcpy(p->f.daddr, &ip6->daddr, 16);
		p->l4 = p->l3 + sizeof(*ip6);
	} else {
		return 0;
	}
	if (p->f.proto == IPPROTO_TCP) {
		struct tcphdr th;
		if (bpf_skb_load_bytes(skb, p->l4, &th, sizeof(th)) < 0)
			return 0;
		p->f.sport = th.source;
		p->f.dport = th.dest;
		p->csum = p->l4 + __builtin_offsetof(struct tcphdr, check);
		p->syn_only = th.syn && !th.ack;
		return 1;
	}
	if (p->f.proto == IPPROTO_UDP) {
		struct udphdr uh;
		if (bpf_skb_load_bytes(skb, p->l4, &uh, sizeof(uh)) < 0)
			return 0;
		p->f.sport = uh.source;
		p->f.dport = uh.dest;
		p->csum = p->l4 + __builtin_offsetof(struct udphdr, check);
		return 1;
	}
	return 0;
}

// rewrite writes addr and port over the packet's destination (dst) or
// source, with the checksums.
static __always_inline int rewrite(struct __sk_buff *skb, struct pkt *p, int dst, const __u8 *addr, __u16 port)
{
	__u64 csum_flags = p->f.proto == IPPROTO_UDP ? BPF_F_MARK_MANGLED_0 : 0;
	const __u8 *old = dst ? p->f.daddr : p->f.saddr;
	if (p->f.family == 4) {
		__u32 from, to;
		__builtin_memcpy(&from, old, 4);
		__builtin_memcpy(&to, addr, 4);
		__u32 off = p->l3 + (dst ? __builtin_offsetof(struct iphdr, daddr) : __builtin_offsetof(struct iphdr, saddr));
		if (bpf_l4_csum_replace(skb, p->csum, from, to, BPF_F_PSEUDO_HDR | 4 | csum_flags) < 0 ||
		    bpf_l3_csum_replace(skb, p->l3 + __builtin_offsetof(struct iphdr, check), from, to, 4) < 0 ||
		    bpf_skb_store_bytes(skb, off, &to, 4, 0) < 0)
			return -1;
	} else {
		__u8 from[16], to[16];
		__builtin_memcpy(from, old, 16);
		__builtin_memcpy(to, addr, 16);
		__s64 diff = bpf_csum_diff((__be32 *)from, 16, (__be32 *)to, 16, 0);
		__u32 off = p->l3 + (dst ? __builtin_offsetof(struct ipv6hdr, daddr) : __builtin_offsetof(struct ipv6hdr, saddr));
		if (diff < 0 || bpf_l4_csum_replace(skb, p->csum, 0, diff, BPF_F_PSEUDO_HDR | csum_flags) < 0 ||
		    bpf_skb_store_bytes(skb, off, to, 16, 0) < 0)
			return -1;
	}
	__u16 oldport = dst ? p->f.dport : p->f.sport;
	if (oldport != port) {
		if (bpf_l4_csum_replace(skb, p->csum, oldport, port, 2 | csum_flags) < 0 ||
		    bpf_skb_store_bytes(skb, p->l4 + (dst ? 2 : 0), &port, 2, 0) < 0)
			return -1;
	}
	return 0;
}

// from_net translates the packets of clients outside the node to a
// service's address: a flow's first packet (a TCP SYN, any UDP
// datagram) picks the backend, the flow's later ones follow it, and the
// reply's translation back is remembered.
SEC("tc")
int from_net(struct __sk_buff *skb)
{
	struct pkt p = {};
	if (!parse(skb, &p))
		return TC_ACT_OK;
	struct flow_val *fv = bpf_map_lookup_elem(&flows, &p.f);
	struct backend_val b;
	__u8 masq = 0;
	if (fv && fv->dir == FLOW_FORWARD) {
		__builtin_memcpy(b.addr, fv->addr, 16);
		b.port = fv->port;
		masq = fv->masq;
	} else {
		if (p.f.proto == IPPROTO_TCP && !p.syn_only)
			return TC_ACT_OK; // not a new connection: not ours
		struct svc_key key = {.port = p.f.dport, .proto = p.f.proto, .family = p.f.family, .scope = SCOPE_PACKET};
		__builtin_memcpy(key.addr, p.f.daddr, 16);
		struct affinity_key ak = {};
		__builtin_memcpy(ak.addr, p.f.saddr, 16);
		int found;
		__u32 flags = 0;
		struct svc_val *svc = bpf_map_lookup_elem(&services, &key);
		if (!svc)
			return TC_ACT_OK;
		if (svc->flags & SVC_RANGED) {
			struct range_key rk = {.prefixlen = 32 + 8 + 128, .id = svc->id, .family = p.f.family};
			__builtin_memcpy(rk.addr, p.f.saddr, 16);
			if (!bpf_map_lookup_elem(&ranges, &rk))
				return TC_ACT_SHOT;
		}
		int err = 0;
		if ((svc->flags & SVC_MAGLEV) && !svc->affinity && maglev_pick(svc, &p.f, &b) == 0) {
			found = 1;
			flags = svc->flags;
		} else {
			err = pick(&key, svc, &ak, &b, &found, &flags);
		}
		if (err == EPERM)
			return TC_ACT_SHOT; // Local policy, no endpoint here
		if (err || !found)
			return TC_ACT_OK; // none anywhere: the node's stack refuses it
		masq = (flags & SVC_MASQ) != 0;
		struct flow_val fwd = {.port = b.port, .dir = FLOW_FORWARD, .masq = masq};
		__builtin_memcpy(fwd.addr, b.addr, 16);
		bpf_map_update_elem(&flows, &p.f, &fwd, BPF_ANY);
		// The reply: from the backend to the client.
		struct flow_key rk = {.sport = b.port, .dport = p.f.sport, .proto = p.f.proto, .family = p.f.family};
		__builtin_memcpy(rk.saddr, b.addr, 16);
		__builtin_memcpy(rk.daddr, p.f.saddr, 16);
		struct flow_val rv = {.port = p.f.dport, .dir = FLOW_REPLY};
		__builtin_memcpy(rv.addr, p.f.daddr, 16);
		bpf_map_update_elem(&flows, &rk, &rv, BPF_ANY);
	}
	if (rewrite(skb, &p, 1, b.addr, b.port) < 0)
		return TC_ACT_SHOT;
	if (masq)
		skb->mark |= masq_mark;
	return TC_ACT_OK;
}

// to_net translates a backend's replies to a client outside the node
// back: from the service's address.
SEC("tc")
int to_net(struct __sk_buff *skb)
{
	struct pkt p = {};
	if (!parse(skb, &p))
		return TC_ACT_OK;
	struct flow_val *fv = bpf_map_lookup_elem(&flows, &p.f);
	if (!fv || fv->dir != FLOW_REPLY)
		return TC_ACT_OK;
	__u8 addr[16];
	__builtin_memcpy(addr, fv->addr, 16);
	if (rewrite(skb, &p, 0, addr, fv->port) < 0)
		return TC_ACT_SHOT;
	return TC_ACT_OK;
}

char _license[] SEC("license") = "Dual MIT/GPL";
