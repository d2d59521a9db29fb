#!/bin/bash
# bench-pull.sh: a 51 MiB image's first pull and start, and a second pod
# of it, on svcnet's node runtime and on containerd side by side, from
# the same in-process registry on 127.0.0.1 (plain HTTP), with the same
# image (docs/benchmarks.md, "Images: first pull and start"). `make
# bench-pull` runs it as root after `make bench-deps build`.
#
# svcnet: BenchmarkPullStart (internal/node/pods), containers started by
# SVCNET (bin/svcnet) as the agent starts them. containerd: Debian's
# package, a private instance (root, state and socket under
# /tmp/svcnet-bench-ctrd, runc's too, no CRI plugin, nothing listening
# on the network), timed with `ctr images pull --plain-http` and `ctr run` until
# the container's first line of output; ctr run gives each container a
# network namespace of its own with only loopback (no --net-host).
#
# Each side runs only on a quiet machine: it waits until the load
# average (1 min) is below BENCH_MAX_LOAD (0.8), looking every 30 s, and
# gives up after BENCH_QUIET_WAIT seconds (2700) unless BENCH_ANY_LOAD=1.
# BENCH_PULL_ITERATIONS (5) iterations each; the figures are medians.
# Everything it started is ended, and /tmp/svcnet-bench-ctrd removed, on
# any exit.
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."

iterations=${BENCH_PULL_ITERATIONS:-5}
max_load=${BENCH_MAX_LOAD:-0.8}
quiet_wait=${BENCH_QUIET_WAIT:-2700}
svcnet=$(readlink -f "${SVCNET:-bin/svcnet}")
GO=${GO:-go}
D=/tmp/svcnet-bench-ctrd
cg=svcnet-bench-ctrd

die() { echo "bench-pull: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "run as root: namespaces, overlay roots and containerd need it"
for t in containerd ctr runc containerd-shim-runc-v2; do
	command -v "$t" >/dev/null || die "$t not found: make bench-deps installs Debian's containerd"
done
[ -x "$svcnet" ] || die "$svcnet not found: make build"
if [ -e "$D" ]; then
	[ -S "$D/ctrd.sock" ] && ctr --address "$D/ctrd.sock" version >/dev/null 2>&1 &&
		die "a containerd serves $D/ctrd.sock: another run of this script?"
	die "$D is left from an earlier run: remove it (after unmounting what is mounted under it)"
fi

registry_pid="" containerd_pid=""
# The shims' sockets are in /run/containerd/s whatever containerd's
# state directory (1.6): the directory goes too if this run made it.
[ -e /run/containerd ] && made_run_dir="" || made_run_dir=1
ctr_pids=()
ctrd() { ctr --address "$D/ctrd.sock" "$@"; }

cleanup() {
	local rc=$? pid shim ns m d f
	set +e
	trap - EXIT INT TERM
	if [ -n "$containerd_pid" ] && kill -0 "$containerd_pid" 2>/dev/null; then
		for id in $(ctrd task ls -q 2>/dev/null); do ctrd task kill -s SIGKILL "$id" >/dev/null 2>&1; done
		sleep 0.5
		for id in $(ctrd task ls -q 2>/dev/null); do ctrd task delete -f "$id" >/dev/null 2>&1; done
		for id in $(ctrd containers ls -q 2>/dev/null); do ctrd containers rm "$id" >/dev/null 2>&1; done
	fi
	for pid in "${ctr_pids[@]}"; do kill "$pid" 2>/dev/null; done
	# Shims outlive their containerd by design, and svcnet's shims the
	# benchmark (on ^C): each container's process by the pid its runtime
	# recorded, and its shim (containerd's: the container's parent).
	for f in "$D"/state/io.containerd.runtime.v2.task/*/*/init.pid; do
		[ -s "$f" ] || continue
		pid=$(cat "$f")
		shim=$(awk '{print $4}' "/proc/$pid/stat" 2>/dev/null)
		kill -KILL "$pid" 2>/dev/null
		[ -n "$shim" ] && [ "$(cat "/proc/$shim/comm" 2>/dev/null)" = containerd-shim ] && kill -KILL "$shim" 2>/dev/null
	done
	for f in "$D"/tmp/*/*/pod-*/*.run/pid; do
		[ -s "$f" ] || continue
		read -r pid shim _ <"$f"
		kill -KILL -- "-$pid" "$pid" "$shim" 2>/dev/null
	done
	for ns in $(ip netns list | awk '/^svcnet-bench-/ {print $1}'); do ip netns delete "$ns"; done
	for pid in $containerd_pid $registry_pid; do
		[ -n "$pid" ] || continue
		kill "$pid" 2>/dev/null
		for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
	# Mounts of containers and snapshots under $D, deepest first.
	while read -r m; do umount -l "$m" 2>/dev/null; done < <(awk -v d="$D/" 'index($2, d) == 1 {print $2}' /proc/mounts | sort -r)
	for d in /sys/fs/cgroup/*/$cg; do
		[ -d "$d" ] || continue
		find "$d" -mindepth 1 -depth -type d -exec rmdir {} \; 2>/dev/null
		rmdir "$d" 2>/dev/null || echo "bench-pull: could not remove cgroup $d" >&2
	done
	rm -rf "$D"
	[ -n "$made_run_dir" ] && rm -rf /run/containerd
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$D"

# wait_quiet: until the 1-minute load average is below max_load.
wait_quiet() {
	local start=$SECONDS load
	while :; do
		load=$(cut -d' ' -f1 /proc/loadavg)
		awk -v l="$load" -v m="$max_load" 'BEGIN { exit !(l < m) }' && { echo "load average $load: measuring ($1)"; return; }
		if [ $((SECONDS - start)) -ge "$quiet_wait" ]; then
			[ "${BENCH_ANY_LOAD:-}" = 1 ] && { echo "load average still $load after ${quiet_wait}s: measuring anyway ($1)"; return; }
			die "load average still $load after ${quiet_wait}s (want < $max_load): not measuring $1 (BENCH_ANY_LOAD=1 measures anyway)"
		fi
		echo "load average $load, want < $max_load: waiting ($1)"
		sleep 30
	done
}

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "machine: $(nproc) cores, $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo), Linux $(uname -r), $(free -g | awk '/^Mem:/ {print $2}') GiB"
echo "svcnet: $svcnet ($(git rev-parse --short HEAD 2>/dev/null || echo '?')); $(containerd --version); $(runc --version | head -1); $($GO version)"

echo "building the benchmark (internal/node/pods' test binary)"
$GO test -c -o "$D/pods.test" ./internal/node/pods

# svcnet.
wait_quiet svcnet
mkdir "$D/tmp"
(cd "$D" && TMPDIR="$D/tmp" ./pods.test -test.run '^$' -test.bench '^BenchmarkPullStart$' -test.benchtime "${iterations}x" \
	-test.timeout 30m -pull.svcnet "$svcnet") | tee "$D/svcnet.out"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
metric() { awk -v u="$1" '/^BenchmarkPullStart/ { for (i = 2; i <= NF; i++) if ($i == u) print $(i - 1) }' "$D/svcnet.out"; }
s_first=$(metric first-ms) s_pull=$(metric pull-ms) s_second=$(metric second-ms)
[ -n "$s_first" ] && [ -n "$s_second" ] || die "no figures from BenchmarkPullStart"

# containerd: the same image, from the same registry code.
wait_quiet containerd
(cd "$D" && exec ./pods.test -test.run '^TestServeBenchImage$' -test.v -test.timeout 0 \
	-pull.serve "$D/ref" -pull.serve-for 30m >"$D/registry.log" 2>&1) &
registry_pid=$!
for _ in $(seq 600); do [ -s "$D/ref" ] && break; kill -0 "$registry_pid" 2>/dev/null || break; sleep 0.1; done
[ -s "$D/ref" ] || { cat "$D/registry.log" >&2; die "the registry did not start"; }
ref=$(cat "$D/ref")

cat >"$D/config.toml" <<EOF
version = 2
root = "$D/root"
state = "$D/state"
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs"]
[grpc]
  address = "$D/ctrd.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "$D/opt"
EOF
containerd --config "$D/config.toml" --root "$D/root" --state "$D/state" --address "$D/ctrd.sock" >"$D/containerd.log" 2>&1 &
containerd_pid=$!
for _ in $(seq 100); do ctrd version >/dev/null 2>&1 && break; sleep 0.1; done
ctrd version >/dev/null || { tail "$D/containerd.log" >&2; die "containerd did not start"; }
listening=$(ss -Hltnup | grep -E "pid=($containerd_pid|$registry_pid)," | grep -v '127.0.0.1:' || true)
[ -z "$listening" ] || die "something of the benchmark listens beyond loopback: $listening"

cmd=(/bin/busybox sh -c 'echo up; exec /bin/busybox sleep 120')
fds=()
# run_until_up ID: `ctr run` of the image as container ID, returning
# once the container has printed its first line, "up" (it then sleeps).
run_until_up() {
	local id=$1 fifo="$D/$1.out" fd line
	mkfifo "$fifo"
	exec {fd}<>"$fifo"
	fds+=("$fd")
	ctrd run --cgroup "/$cg/$id" --runc-root "$D/runc" --fifo-dir "$D/fifo" "$ref" "$id" "${cmd[@]}" >"$fifo" 2>&1 &
	ctr_pids+=($!)
	if ! read -r -t 60 line <&"$fd" || [ "$line" != up ]; then
		die "ctr run $id: ${line:-no output in 60 s}"
	fi
}

c_first=() c_pull=() c_second=()
for i in $(seq "$iterations"); do
	[ -z "$(ctrd content ls -q)" ] && [ "$(ctrd snapshots ls | tail -n +2 | wc -l)" = 0 ] ||
		die "containerd's store is not empty before iteration $i"
	t0=${EPOCHREALTIME/./}
	ctrd images pull --plain-http "$ref" >"$D/pull-$i.log" 2>&1 || { cat "$D/pull-$i.log" >&2; die "ctr images pull failed"; }
	t1=${EPOCHREALTIME/./}
	run_until_up "bench-$i-a"
	t2=${EPOCHREALTIME/./}
	run_until_up "bench-$i-b"
	t3=${EPOCHREALTIME/./}
	c_pull+=("$(((t1 - t0) / 1000))") c_first+=("$(((t2 - t0) / 1000))") c_second+=("$(((t3 - t2) / 1000))")
	echo "containerd iteration $i: pull $((  (t1 - t0) / 1000 )) ms + run $(( (t2 - t1) / 1000 )) ms = first $(( (t2 - t0) / 1000 )) ms; second container $(( (t3 - t2) / 1000 )) ms"
	# Not timed: the containers and the image go, content and snapshots
	# with it (a synchronous garbage collection), for the next iteration.
	for id in "bench-$i-a" "bench-$i-b"; do ctrd task kill -s SIGKILL "$id" >/dev/null; done
	for pid in "${ctr_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
	ctr_pids=()
	for fd in "${fds[@]}"; do exec {fd}<&-; done
	fds=()
	for id in "bench-$i-a" "bench-$i-b"; do ctrd containers rm "$id" >/dev/null; rm -f "$D/$id.out"; done
	ctrd images rm --sync "$ref" >/dev/null
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

c_first_m=$(printf '%s\n' "${c_first[@]}" | median)
c_pull_m=$(printf '%s\n' "${c_pull[@]}" | median)
c_second_m=$(printf '%s\n' "${c_second[@]}" | median)
echo
echo "medians of $iterations, ms:"
printf '%-44s %10s %10s\n' "" svcnet containerd
printf '%-44s %10.0f %10.0f\n' "first pull and start" "$s_first" "$c_first_m"
printf '%-44s %10.0f %10.0f\n' "  the pull" "$s_pull" "$c_pull_m"
printf '%-44s %10.0f %10.0f\n' "second pod of the image (layers present)" "$s_second" "$c_second_m"
awk -v sf="$s_first" -v cf="$c_first_m" -v ss="$s_second" -v cs="$c_second_m" 'BEGIN {
	printf "first pull and start: svcnet/containerd = %.2fx (target <= 2x): %s\n", sf / cf, (sf <= 2 * cf) ? "met" : "NOT met"
	printf "second start: %.0f ms (target < 300 ms): %s; svcnet/containerd = %.2fx\n", ss, (ss < 300) ? "met" : "NOT met", ss / cs
}'
