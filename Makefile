# svcnet — the two commands of the README, and the steps they are made of.
# Both need root: svcnet's cluster lives in network namespaces.

SHELL := /bin/bash
GO    ?= go
BIN   := bin/svcnet
# Debian packages that svcnet and its tests use.
# netcat-openbsd: pods of the agnhost image run the machine's nc, as the
# image's own.
DEB_PACKAGES := iptables nftables iproute2 conntrack dnsutils curl dnsperf iputils-ping procps busybox-static netcat-openbsd
# What only the tests use: QEMU and busybox for the virtual machine that
# has IPVS and the dummy link (this kernel has neither), and the IPVS tools.
TEST_PACKAGES := qemu-system-x86 busybox-static ipvsadm ipset xz-utils clang llvm libbpf-dev bpftool
# The VM's kernel: Debian's linux-image package, unpacked (not installed).
VM_KERNEL_DIR := /var/cache/svcnet/vm
# CoreDNS, built outside our module, for the test that compares its answers
# with svcnet dns's (test/e2e/dns reads this path, or SVCNET_COREDNS).
COREDNS := /var/cache/svcnet/coredns/v1.14.7/coredns
# kubectl versions the end-to-end tests drive (google-cloud-cli's kubectl package).
KUBECTL_VERSIONS := 1.27 1.33
RUN_DIR := $(HOME)/.svcnet/run

.PHONY: run test deps test-deps build bpf check-kubectl lint bench bench-deps bench-pull clean conformance conformance-network gateway-conformance image soak

## run: install what is missing, build, and start svcnet with the reference scenario
run: deps build
	./hack/run.sh

# make test links its hundred-odd test binaries (and the race-built svcnet)
# without DWARF: a third less time in the linker each, and panics and race
# reports still name files and lines.
TEST_GOFLAGS := -ldflags=-w
# The cluster tests make test runs with a race-built svcnet, and only so.
RACE_CLUSTER_TESTS := TestReferenceScenario|TestDownAfterCrash

## test: install what is missing, build, and run every test
test: deps test-deps build check-kubectl
	@# The BPF programs as clang compiles them are what is committed.
	./hack/bpf.sh --check
	$(GO) vet ./...
	$(GO) tool staticcheck ./...
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	@# Every test runs once. Here the packages outside internal/: the
	@# end-to-end ones run the svcnet that build just made
	@# (SVCNET_E2E_BINARY) rather than each linking one of its own, less
	@# the two cluster tests that run with a race-built svcnet below.
	SVCNET_VM_LATER=1 SVCNET_E2E_BINARY=$(abspath $(BIN)) GOFLAGS=$(TEST_GOFLAGS) $(GO) test -count=1 -timeout 20m \
		-skip '^($(RACE_CLUSTER_TESTS))$$' $$($(GO) list ./... | grep -v -e '/internal/' -e '/internal$$')
	@# The tests that run in the QEMU VM, alone: its emulated CPUs take both
	@# cores and would starve the clusters of the tests above.
	SVCNET_E2E_BINARY=$(abspath $(BIN)) GOFLAGS=$(TEST_GOFLAGS) $(GO) test -p 1 -count=1 -timeout 30m -run '^(TestBoot|TestProxyIPVS|TestReferenceScenarioIPVS|TestLimitsCgroup2)$$' ./test/vm ./test/e2e/proxy ./test/e2e/cluster ./internal/node/cgroups
	@# The Gateway API's conformance suite, as make gateway-conformance
	@# runs it (every test of the features the GatewayClass claims), without
	@# writing its page.
	WRITE_DOC=0 ./hack/gateway-conformance.sh
	@# With the race detector: the packages under internal/ (unit and
	@# kernel tests, no cluster), then two cluster tests with a race-built
	@# svcnet (supervisor, agents, pods).
	SVCNET_VM_LATER=1 GOFLAGS=$(TEST_GOFLAGS) $(GO) test -race -count=1 -timeout 10m ./internal/...
	@# What the race detector would distort (its goroutine stacks are
	@# larger), measured without it: the ingress's memory per stalled client.
	GOFLAGS=$(TEST_GOFLAGS) $(GO) test -count=1 -timeout 5m -run '^TestSendTimeoutMemory$$' ./internal/ingress/server/
	SVCNET_E2E_RACE=1 GOFLAGS=$(TEST_GOFLAGS) $(GO) test -count=1 -timeout 15m -run '^($(RACE_CLUSTER_TESTS))$$' ./test/e2e/cluster/

## deps: install the Debian packages svcnet uses (needs root)
deps:
	@missing=""; for p in $(DEB_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		if [ "$$(id -u)" != 0 ]; then echo "run as root (sudo make ...): apt-get must install$$missing"; exit 1; fi; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi
	@# make run drives the cluster with kubectl: Debian's when there is none.
	@command -v kubectl >/dev/null 2>&1 || { echo "installing kubernetes-client (kubectl)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kubernetes-client >/dev/null; }

## test-deps: the Debian packages only the tests use, the VM's kernel, CoreDNS and kube-proxy
test-deps:
	@missing=""; for p in $(TEST_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		if [ "$$(id -u)" != 0 ]; then echo "run as root (sudo make ...): apt-get must install$$missing"; exit 1; fi; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi
	./hack/vm-kernel.sh $(VM_KERNEL_DIR)
	./hack/coredns.sh $(COREDNS)
	@# Kubernetes' own kube-proxy, which the differential tests run beside
	@# svcnet's proxy (built once, outside our module).
	./hack/kube-proxy-build.sh

## check-kubectl: the tests drive the real kubectl, several versions of it
check-kubectl:
	@dir=$$(dirname "$$(readlink -f "$$(command -v kubectl)")" 2>/dev/null); \
	for v in $(KUBECTL_VERSIONS); do \
		if [ ! -x "$$dir/kubectl.$$v" ]; then \
			echo "kubectl.$$v not found next to kubectl ($$dir): install Google's kubectl package (google-cloud-cli), which ships kubectl.1.27 … kubectl.1.33"; exit 1; \
		fi; \
	done

build:
	$(GO) build -o $(BIN) ./cmd/svcnet

## bpf: compile the BPF programs of internal/bpflb/c (commit the result)
bpf:
	@missing=""; for p in clang llvm libbpf-dev; do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then echo "installing:$$missing"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; fi
	./hack/bpf.sh

## image: svcnet as an OCI image (FROM scratch: the static binary and the
## netfilter tools its proxy runs), built offline with umoci, checked (as
## root: the tools run chrooted in a namespace of the check's own), and
## saved as the OCI archive bin/svcnet-oci.tar
image:
	@missing=""; for p in umoci iptables conntrack ipset; do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then echo "installing:$$missing"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; fi
	./hack/image.sh bin/svcnet-oci.tar

## conformance: Kubernetes' own e2e suite (v1.37.2, built once, outside our
## module: long the first time) against a fresh cluster; writes
## docs/conformance.md. Not part of make test.
conformance: deps build
	./hack/conformance.sh

## conformance-network: the suite's other [sig-network] Services, DNS and
## EndpointSlice specs (those that need no cloud, no feature gate off by
## default and no serial run); writes docs/conformance-network.md.
conformance-network: deps build
	FOCUS='\[sig-network\] (Services|DNS|EndpointSlice)' \
	SKIP='\[Conformance\]|\[Serial\]|\[Disruptive\]|\[Flaky\]|\[Slow\]|\[Feature:' \
	REPORT=/var/tmp/svcnet-conformance/report-network DOC=docs/conformance-network.md \
	NOTES=docs/conformance-network-notes.md \
	TITLE="Kubernetes' other network specs: svcnet against the e2e suite's Services, DNS and EndpointSlice specs" \
	RUN_NAME='make conformance-network' ./hack/conformance.sh

## gateway-conformance: the Gateway API's conformance suite (the
## profiles GATEWAY-HTTP, GATEWAY-GRPC and GATEWAY-TLS; PROFILES=… for
## others) against a fresh 2-node cluster, from the outside client;
## writes docs/gateway-conformance.md.
gateway-conformance: deps build
	./hack/gateway-conformance.sh

## soak: an hour (SOAK_DURATION) of steady traffic on every path of a
## 3-node cluster with three control planes (ClusterIP, NodePort,
## LoadBalancer, Ingress, DNS through the ClusterIP and the node-local
## cache) under a rollout every minute, continuous churn, a component
## killed every five minutes and an etcd member once; writes
## docs/soak/report.md and its plots. Not part of make test.
SOAK_DURATION ?= 1h
SOAK_TIMEOUT  ?= 2h
soak: deps build check-kubectl
	SVCNET_SOAK_DURATION=$(SOAK_DURATION) SVCNET_SOAK_OUT=$(abspath docs/soak) SVCNET_E2E_BINARY=$(abspath $(BIN)) \
		$(GO) test -count=1 -timeout $(SOAK_TIMEOUT) -run '^TestSoak$$' -v ./test/e2e/cluster/

## bench-deps: what only the benchmarks use: wrk, nginx-light to compare
## the ingress with, and containerd to compare image pulls and container
## starts with (installed with their services kept stopped: a policy-rc.d
## refuses the start, so nothing listens on the host; bench-pull runs a
## containerd of its own)
BENCH_PACKAGES := wrk nginx-light containerd
bench-deps: deps
	@missing=""; for p in $(BENCH_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		own=""; if [ ! -e /usr/sbin/policy-rc.d ]; then printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; own=1; fi; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; rc=$$?; \
		if [ -n "$$own" ]; then rm -f /usr/sbin/policy-rc.d; fi; exit $$rc; \
	fi

## bench-pull: a 51 MiB image's first pull and start, and a second pod of
## it, on svcnet's node runtime and on containerd side by side, from a
## registry on 127.0.0.1 (hack/bench-pull.sh; docs/benchmarks.md). Waits
## for a quiet machine (load average below 0.8) before each side.
bench-pull: bench-deps build
	./hack/bench-pull.sh

lint:
	$(GO) vet ./...
	$(GO) tool staticcheck ./...

clean:
	rm -rf bin
