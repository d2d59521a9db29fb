package bpflb

// The programs are compiled with Debian's clang by `make bpf`
// (hack/bpf.sh sets MULTIARCH, where the kernel's asm headers are); the
// object and its Go bindings are committed, so that building svcnet
// needs no clang, and make test compiles them again and fails if they
// differ from what is committed.
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -I/usr/include/${MULTIARCH}" -target bpfel -type svc_key -type svc_val -type backend_key -type backend_val -type revnat_key -type affinity_key -type affinity_val -type svc_stats -type flow_key -type flow_val -type range_key -type maglev_key lb c/lb.c
