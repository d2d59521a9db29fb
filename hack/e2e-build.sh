#!/bin/sh
# Builds Kubernetes' own end-to-end test binary (test/e2e of
# k8s.io/kubernetes) outside our module, once, for `make conformance`.
#
# Usage: hack/e2e-build.sh [OUT]   (default $SVCNET_CONFORMANCE_DIR/e2e.test-$K8S_VERSION)
set -eu

K8S_VERSION=${K8S_VERSION:-v1.37.2}
WORK=${SVCNET_CONFORMANCE_DIR:-/var/tmp/svcnet-conformance}
OUT=${1:-$WORK/e2e.test-$K8S_VERSION}

if [ -x "$OUT" ]; then
	echo "e2e-build: $OUT is there"
	exit 0
fi
src=$(K8S_VERSION=$K8S_VERSION "$(dirname "$0")/k8s-tree.sh")

echo "e2e-build: go test -c ./test/e2e in $src (takes long the first time)"
cd "$src"
# -mod=mod records the staging modules' checksums in this copy's go.sum.
GOWORK=off GOFLAGS=-mod=mod go test -c -o "$OUT.tmp" ./test/e2e
mv "$OUT.tmp" "$OUT"
echo "e2e-build: built $OUT"
