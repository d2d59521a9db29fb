#!/bin/sh
# Builds Kubernetes' own end-to-end test binary (test/e2e of
# k8s.io/kubernetes) outside our module, once, for `make conformance`.
#
# The module zip of k8s.io/kubernetes replaces every k8s.io/* staging module
# with a folder under ./staging that the zip does not contain; the staging
# modules are published under the matching v0 version, so the replaces are
# pointed there before `go test -c`.
#
# Usage: hack/e2e-build.sh [OUT]   (default $SVCNET_CONFORMANCE_DIR/e2e.test-$K8S_VERSION)
set -eu

K8S_VERSION=${K8S_VERSION:-v1.37.2}
STAGING_VERSION=v0.${K8S_VERSION#v1.}
WORK=${SVCNET_CONFORMANCE_DIR:-/var/tmp/svcnet-conformance}
OUT=${1:-$WORK/e2e.test-$K8S_VERSION}

if [ -x "$OUT" ]; then
	echo "e2e-build: $OUT is there"
	exit 0
fi
mkdir -p "$WORK"

# Outside any module: `go mod download` of a module@version needs no go.mod.
dir=$(cd "$WORK" && GOWORK=off GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$K8S_VERSION" |
	sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
if [ -z "$dir" ] || [ ! -d "$dir" ]; then
	echo "e2e-build: cannot download k8s.io/kubernetes@$K8S_VERSION" >&2
	exit 1
fi

src=$WORK/kubernetes-$K8S_VERSION
if [ ! -f "$src/.svcnet-prepared" ]; then
	rm -rf "$src"
	cp -r "$dir" "$src"
	chmod -R u+w "$src"
	sed -i -E "s#^([[:space:]]*)(k8s\.io/[a-z0-9-]+) => \./staging/src/k8s\.io/[a-z0-9-]+\$#\1\2 => \2 $STAGING_VERSION#" "$src/go.mod"
	if grep -q '=> ./staging' "$src/go.mod"; then
		echo "e2e-build: staging replaces left in $src/go.mod" >&2
		exit 1
	fi
	touch "$src/.svcnet-prepared"
fi

echo "e2e-build: go test -c ./test/e2e in $src (takes long the first time)"
cd "$src"
# -mod=mod records the staging modules' checksums in this copy's go.sum.
GOWORK=off GOFLAGS=-mod=mod go test -c -o "$OUT.tmp" ./test/e2e
mv "$OUT.tmp" "$OUT"
echo "e2e-build: built $OUT"
