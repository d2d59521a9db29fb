#!/bin/sh
# Compiles svcnet's BPF programs (internal/bpflb/c) with clang into the
# object and Go bindings that are committed beside them (bpf2go), so that
# building svcnet needs no clang. With --check (make test), fails when
# what clang makes differs from what is committed.
set -eu
cd "$(dirname "$0")/.."
# The kernel's asm headers, which <linux/bpf.h> includes, are Debian's
# per architecture.
MULTIARCH="$(uname -m)-linux-gnu"
export MULTIARCH
go generate ./internal/bpflb
if [ "${1:-}" = --check ]; then
	if ! git diff --exit-code --stat -- internal/bpflb; then
		echo "internal/bpflb: the committed BPF object differs from what clang makes of c/lb.c: run make bpf and commit" >&2
		exit 1
	fi
fi
