#!/bin/bash
# coredns.sh PATH: build CoreDNS 1.14.7 into PATH (…/coredns), for the
# differential test that compares its answers with svcnet dns's. It is
# built with `go install` from the Go module proxy, outside svcnet's
# module (svcnet never links CoreDNS's code). Runs once: an existing
# binary is kept.
set -euo pipefail
out=${1:?usage: coredns.sh PATH}
version=v1.14.7
if [ -x "$out" ]; then
	# Read whole, not piped into grep -q: with pipefail, grep leaving early
	# would fail the check.
	have=$("$out" -version 2>/dev/null || true)
	case "$have" in *"CoreDNS-${version#v}"*) exit 0 ;; esac
fi
dir=$(dirname "$out")
mkdir -p "$dir"
work=$(mktemp -d "$dir/.svcnet-coredns-XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "coredns: building github.com/coredns/coredns@$version (once)" >&2
# Outside any module, so our go.mod and go.work play no part.
(cd "$work" && GOWORK=off GOFLAGS=-buildvcs=false GOBIN="$work/bin" go install "github.com/coredns/coredns@$version")
mv "$work/bin/coredns" "$out"
