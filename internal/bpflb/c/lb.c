// svcnet's socket-level service load balancer: cgroup v2 programs that
// give a socket of a pod (or of a node process in svcnet's cgroups) the
// address of one of a Service's endpoints when it connects to, or sends
// a datagram to, the Service's address; and that show the Service's
// address again where the socket would see the endpoint's (the source
// of a datagram received, the peer's name).
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
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define AF_INET 2
#define AF_INET6 10
#define EPERM 1
#define ECONNREFUSED 111

// Verdicts of a service entry without backends.
#define SVC_REJECT 1 // no endpoint anywhere: ECONNREFUSED, as REJECT
#define SVC_DROP 2   // Local policy, none on this node: EPERM

struct svc_key {
	__u8 addr[16]; // IPv4 in the first four bytes, the rest zero
	__u16 port;    // network order
	__u8 proto;    // IPPROTO_*
	__u8 family;   // 4 or 6
};

struct svc_val {
	__u32 id;
	__u16 count; // backends, in slots 0..count-1 of generation gen
	__u8 gen;
	__u8 verdict; // when count is 0
	__u32 affinity; // ClientIP affinity timeout in seconds, 0: none
	__u32 pad;
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

struct affinity_key {
	__u64 netns; // the client's network namespace: its pod
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

// pick chooses a backend of the service at key into out. It returns 0,
// with *found set when out holds a backend (unset: the address is not a
// service's), or the errno the caller should fail with.
static __always_inline int pick(void *ctx, struct svc_key *key, struct backend_val *out, int *found)
{
	*found = 0;
	for (int attempt = 0; attempt < 2; attempt++) {
		struct svc_val *svc = bpf_map_lookup_elem(&services, key);
		if (!svc)
			return 0;
		__u32 id = svc->id;
		if (svc->count == 0) {
			count(id, 1);
			return svc->verdict == SVC_DROP ? EPERM : ECONNREFUSED;
		}
		struct affinity_key ak = {};
		__u64 now = 0;
		if (svc->affinity) {
			ak.netns = bpf_get_netns_cookie(ctx);
			ak.id = id;
			now = bpf_ktime_get_ns();
			struct affinity_val *av = bpf_map_lookup_elem(&affinity, &ak);
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
			bpf_map_update_elem(&affinity, &ak, &av, BPF_ANY);
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

static __always_inline int translate4(struct bpf_sock_addr *ctx)
{
	struct svc_key key = {.port = ctx->user_port, .proto = ctx->protocol, .family = 4};
	__u32 ip = ctx->user_ip4;
	__builtin_memcpy(key.addr, &ip, 4);
	struct backend_val b;
	int found;
	int err = pick(ctx, &key, &b, &found);
	if (err) {
		bpf_set_retval(-err);
		return 0;
	}
	if (!found)
		return 1;
	struct backend_val svc = {.port = key.port, .family = key.family};
	__builtin_memcpy(svc.addr, key.addr, 16);
	__u32 bip;
	__builtin_memcpy(&bip, b.addr, 4);
	ctx->user_ip4 = bip;
	ctx->user_port = b.port;
	remember(ctx, &b, &svc);
	return 1;
}

// A dual-stack socket reaches IPv4 addresses as IPv4-mapped IPv6 ones
// (::ffff:a.b.c.d): its hooks are the IPv6 ones, its services the IPv4
// entries.
static __always_inline int v4mapped(const __u32 *a)
{
	return a[0] == 0 && a[1] == 0 && a[2] == bpf_htonl(0xffff);
}

// load6 reads an IPv6 address from ctx into addr, as the maps key it
// (an IPv4-mapped one as the IPv4 address), and returns its family.
static __always_inline __u8 load6(struct bpf_sock_addr *ctx, __u8 *addr)
{
	__u32 *a = (__u32 *)addr;
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

// store6 writes addr of family into ctx's IPv6 address.
static __always_inline void store6(struct bpf_sock_addr *ctx, const __u8 *addr, __u8 family)
{
	const __u32 *a = (const __u32 *)addr;
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

static __always_inline int translate6(struct bpf_sock_addr *ctx)
{
	struct svc_key key = {.port = ctx->user_port, .proto = ctx->protocol};
	key.family = load6(ctx, key.addr);
	struct backend_val b;
	int found;
	int err = pick(ctx, &key, &b, &found);
	if (err) {
		bpf_set_retval(-err);
		return 0;
	}
	if (!found)
		return 1;
	struct backend_val svc = {.port = key.port, .family = key.family};
	__builtin_memcpy(svc.addr, key.addr, 16);
	store6(ctx, b.addr, b.family);
	ctx->user_port = b.port;
	remember(ctx, &b, &svc);
	return 1;
}

// untranslate4 shows the service's address where the socket sees the
// endpoint's: the source of a datagram received, the peer's name.
static __always_inline int untranslate4(struct bpf_sock_addr *ctx)
{
	struct revnat_key rk = {.cookie = bpf_get_socket_cookie(ctx), .port = ctx->user_port};
	__u32 ip = ctx->user_ip4;
	__builtin_memcpy(rk.addr, &ip, 4);
	struct backend_val *svc = bpf_map_lookup_elem(&revnat, &rk);
	if (!svc)
		return 1;
	__u32 sip;
	__builtin_memcpy(&sip, svc->addr, 4);
	ctx->user_ip4 = sip;
	ctx->user_port = svc->port;
	return 1;
}

static __always_inline int untranslate6(struct bpf_sock_addr *ctx)
{
	struct revnat_key rk = {.cookie = bpf_get_socket_cookie(ctx), .port = ctx->user_port};
	load6(ctx, rk.addr);
	struct backend_val *svc = bpf_map_lookup_elem(&revnat, &rk);
	if (!svc)
		return 1;
	store6(ctx, svc->addr, svc->family);
	ctx->user_port = svc->port;
	return 1;
}

SEC("cgroup/connect4")
int connect4(struct bpf_sock_addr *ctx) { return translate4(ctx); }

SEC("cgroup/sendmsg4")
int sendmsg4(struct bpf_sock_addr *ctx) { return translate4(ctx); }

SEC("cgroup/recvmsg4")
int recvmsg4(struct bpf_sock_addr *ctx) { return untranslate4(ctx); }

SEC("cgroup/getpeername4")
int getpeername4(struct bpf_sock_addr *ctx) { return untranslate4(ctx); }

SEC("cgroup/connect6")
int connect6(struct bpf_sock_addr *ctx) { return translate6(ctx); }

SEC("cgroup/sendmsg6")
int sendmsg6(struct bpf_sock_addr *ctx) { return translate6(ctx); }

SEC("cgroup/recvmsg6")
int recvmsg6(struct bpf_sock_addr *ctx) { return untranslate6(ctx); }

SEC("cgroup/getpeername6")
int getpeername6(struct bpf_sock_addr *ctx) { return untranslate6(ctx); }

char _license[] SEC("license") = "Dual MIT/GPL";
