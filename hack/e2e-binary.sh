#!/usr/bin/env bash
# Builds Kubernetes' own e2e test binary (e2e.test) of the release svcnet
# serves, once, outside svcnet's module: k8s.io/kubernetes from the module
# proxy, its staging replaces pointed at the published k8s.io/* modules
# of the same release. Prints the binary's path.
set -euo pipefail
VERSION=${KUBERNETES_VERSION:-1.37.2}
CACHE=${SVCNET_CACHE:-/var/cache/svcnet}/e2e/v$VERSION
BIN=$CACHE/e2e.test
if [ -x "$BIN" ]; then echo "$BIN"; exit 0; fi
mkdir -p "$CACHE"
export GOWORK=off GOFLAGS=-mod=mod
src=$(go mod download -json "k8s.io/kubernetes@v$VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
work=$CACHE/src
rm -rf "$work"
cp -r "$src" "$work"
chmod -R u+w "$work"
cd "$work"
# ./staging/src/k8s.io/X is not in the module zip: the published
# k8s.io/X of the same release is the same code.
sed -i -E "s#^(\s*)(k8s.io/[a-z0-9-]+) => ./staging/src/k8s.io/[a-z0-9-]+#\1\2 => \2 v0.${VERSION#1.}#" go.mod
go mod download >&2
go test -c -o "$BIN" ./test/e2e >&2
echo "$BIN"
