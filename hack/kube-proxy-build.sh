#!/bin/sh
# Builds Kubernetes' own kube-proxy outside our module, once, from the same
# tree as e2e.test (hack/k8s-tree.sh). The differential tests run it beside
# `svcnet proxy` against one API server and compare the tables they write.
#
# Usage: hack/kube-proxy-build.sh [OUT]   (default $SVCNET_CONFORMANCE_DIR/kube-proxy-$K8S_VERSION)
set -eu

K8S_VERSION=${K8S_VERSION:-v1.37.2}
WORK=${SVCNET_CONFORMANCE_DIR:-/var/tmp/svcnet-conformance}
OUT=${1:-$WORK/kube-proxy-$K8S_VERSION}

if [ -x "$OUT" ]; then
	echo "kube-proxy-build: $OUT is there"
	exit 0
fi
src=$(K8S_VERSION=$K8S_VERSION "$(dirname "$0")/k8s-tree.sh")

echo "kube-proxy-build: go build ./cmd/kube-proxy in $src"
cd "$src"
GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -o "$OUT.tmp" ./cmd/kube-proxy
mv "$OUT.tmp" "$OUT"
echo "kube-proxy-build: built $OUT"
