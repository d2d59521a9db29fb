#!/usr/bin/env bash
# hack/image.sh OUT.tar — svcnet as an OCI image, FROM scratch: the static
# binary at /usr/local/bin/svcnet and nothing else (svcnet needs no shell
# or libraries; its built-in images are the binary too). Built with umoci
# (Debian package), offline; the result is an OCI archive (a tar of an OCI
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

layout=$work/layout
umoci init --layout "$layout"
umoci new --image "$layout:latest"
umoci insert --rootless --image "$layout:latest" "$work/svcnet" /usr/local/bin/svcnet
umoci config --image "$layout:latest" \
	--os linux --architecture amd64 \
	--config.entrypoint /usr/local/bin/svcnet \
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

mkdir -p "$(dirname "$out")"
tar -C "$layout" -cf "$out.tmp" .
mv "$out.tmp" "$out"
echo "wrote $out ($(du -h "$out" | cut -f1)): OCI image svcnet:latest, entrypoint /usr/local/bin/svcnet"
