#!/bin/sh
# Prepares a buildable copy of Kubernetes' source tree (k8s.io/kubernetes at
# $K8S_VERSION) outside our module and prints its directory. Shared by the
# builds of Kubernetes' own binaries we test against: e2e.test for
# `make conformance`, kube-proxy for the differential proxy tests.
#
# The module zip of k8s.io/kubernetes replaces every k8s.io/* staging module
# with a folder under ./staging that the zip does not contain; the staging
# modules are published under the matching v0 version, so the replaces are
# pointed there.
set -eu

K8S_VERSION=${K8S_VERSION:-v1.37.2}
STAGING_VERSION=v0.${K8S_VERSION#v1.}
WORK=${SVCNET_CONFORMANCE_DIR:-/var/tmp/svcnet-conformance}
mkdir -p "$WORK"

src=$WORK/kubernetes-$K8S_VERSION
if [ ! -f "$src/.svcnet-prepared" ]; then
	# Outside any module: `go mod download` of a module@version needs no go.mod.
	dir=$(cd "$WORK" && GOWORK=off GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$K8S_VERSION" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	if [ -z "$dir" ] || [ ! -d "$dir" ]; then
		echo "k8s-tree: cannot download k8s.io/kubernetes@$K8S_VERSION" >&2
		exit 1
	fi
	rm -rf "$src"
	cp -r "$dir" "$src"
	chmod -R u+w "$src"
	sed -i -E "s#^([[:space:]]*)(k8s\.io/[a-z0-9-]+) => \./staging/src/k8s\.io/[a-z0-9-]+\$#\1\2 => \2 $STAGING_VERSION#" "$src/go.mod"
	if grep -q '=> ./staging' "$src/go.mod"; then
		echo "k8s-tree: staging replaces left in $src/go.mod" >&2
		exit 1
	fi
	touch "$src/.svcnet-prepared"
fi
echo "$src"
