#!/usr/bin/env bash
# hack/image.sh OUT.tar — svcnet as an OCI image, FROM scratch: the static
# binary at /usr/local/bin/svcnet, and the netfilter tools its proxy runs
# (iptables and ip6tables, nft and legacy backends, with their extensions;
# ipset — the nftables mode and the conntrack cleanup speak netlink
# themselves — and conntrack, to look at the table), copied from
# this machine's Debian packages with the shared libraries they load, as
# kube-proxy's image carries them. No shell, no package manager. Built
# with umoci (Debian package), offline; the result is an OCI archive (a tar of an OCI
# image layout, tag "latest") that podman, skopeo and containerd import:
#   skopeo copy oci-archive:bin/svcnet-oci.tar docker-daemon:svcnet:latest
#   ctr image import --index-name svcnet:latest bin/svcnet-oci.tar
# The image is checked before it is written: unpacked again, its binary
# must run and be the one built.
set -euo pipefail

out=${1:?usage: hack/image.sh OUT.tar}
cd "$(dirname "$0")/.."
work=$(mktemp -d /tmp/svcnet-image.XXXXXX)
trap 'rm -rf "$work"' EXIT

# Static: the image has no C library.
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$work/svcnet" ./cmd/svcnet

# The tools, each with the libraries ldd names (the loader included) and
# iptables' extensions, at the paths they have here.
root=$work/rootfs
mkdir -p "$root/usr/local/bin"
cp "$work/svcnet" "$root/usr/local/bin/svcnet"
xtlib=/usr/lib/x86_64-linux-gnu/xtables
tools=(/usr/sbin/xtables-nft-multi /usr/sbin/xtables-legacy-multi /usr/sbin/conntrack /usr/sbin/ipset)
for t in "${tools[@]}" "$xtlib"/*.so; do
	[ -e "$t" ] || { echo "$t is missing: apt-get install iptables conntrack ipset (make deps and test-deps install them)" >&2; exit 1; }
	mkdir -p "$root$(dirname "$t")"
	cp -L "$t" "$root$t"
	for lib in $(ldd "$t" | grep -o '/[^ ]*'); do
		mkdir -p "$root$(dirname "$lib")"
		[ -e "$root$lib" ] || cp -L "$lib" "$root$lib"
	done
done
# The commands, as Debian's alternatives name them (the nft backend as
# plain iptables, as on current distributions).
for cmd in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
	ln -sf xtables-nft-multi "$root/usr/sbin/$cmd"
	ln -sf xtables-nft-multi "$root/usr/sbin/${cmd/tables/tables-nft}"
	ln -sf xtables-legacy-multi "$root/usr/sbin/${cmd/tables/tables-legacy}"
done
# iptables takes its lock here; kube-proxy's manifest mounts the node's.
mkdir -p "$root/run" "$root/tmp"

layout=$work/layout
umoci init --layout "$layout"
umoci new --image "$layout:latest"
umoci insert --rootless --image "$layout:latest" "$root" /
umoci config --image "$layout:latest" \
	--os linux --architecture amd64 \
	--config.entrypoint /usr/local/bin/svcnet \
	--config.env PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	--config.label org.opencontainers.image.title=svcnet \
	--config.label org.opencontainers.image.description="Kubernetes service discovery and load balancing: API server, controllers, DNS, node proxy, ingress" \
	--config.label org.opencontainers.image.source=https://github.com/svcnet/svcnet
umoci gc --layout "$layout"

# Check: unpack and run what is inside.
umoci unpack --rootless --image "$layout:latest" "$work/bundle" >/dev/null
inside=$work/bundle/rootfs/usr/local/bin/svcnet
cmp "$inside" "$work/svcnet"
"$inside" --help | grep -q "svcnet" || { echo "the image's svcnet does not run" >&2; exit 1; }
grep -q '"/usr/local/bin/svcnet"' "$work/bundle/config.json" || { echo "the image's entrypoint is not svcnet" >&2; exit 1; }
# The tools run from the image alone (chrooted into it), and iptables
# writes rules with its extensions, in a namespace made for the check.
rootfs=$work/bundle/rootfs
for cmd in "iptables --version" "iptables-legacy --version" "conntrack --version" "ipset --version"; do
	chroot "$rootfs" /usr/sbin/$cmd >/dev/null || { echo "the image's $cmd does not run" >&2; exit 1; }
done
check=svcnet-image-check-$$
ip netns add "$check"
trap 'ip netns delete "$check" 2>/dev/null || true; rm -rf "$work"' EXIT
printf '*nat\n:KUBE-TEST - [0:0]\n-A KUBE-TEST -m comment --comment check -m statistic --mode random --probability 0.5 -j MASQUERADE --random-fully\nCOMMIT\n' |
	ip netns exec "$check" chroot "$rootfs" /usr/sbin/iptables-restore --noflush
ip netns exec "$check" chroot "$rootfs" /usr/sbin/iptables-save -t nat | grep -q -- "--random-fully" ||
	{ echo "the image's iptables did not write a rule with its extensions" >&2; exit 1; }
ip netns delete "$check"

mkdir -p "$(dirname "$out")"
tar -C "$layout" -cf "$out.tmp" .
mv "$out.tmp" "$out"
echo "wrote $out ($(du -h "$out" | cut -f1)): OCI image svcnet:latest, entrypoint /usr/local/bin/svcnet"
