#!/usr/bin/env bash
# `make conformance`: Kubernetes' own e2e suite (e2e.test of $K8S_VERSION,
# built once by hack/e2e-build.sh) against a fresh `svcnet up` cluster.
# Runs the [sig-network] [Conformance] specs (FOCUS and SKIP override),
# writes the JUnit report under $REPORT (default
# $SVCNET_CONFORMANCE_DIR/report) and the pass/fail table to $DOC (default
# docs/conformance.md, titled $TITLE, with the explanations in $NOTES, default
# docs/conformance-notes.md; WRITE_DOC=0: none).
set -euo pipefail
cd "$(dirname "$0")/.."

K8S_VERSION=${K8S_VERSION:-v1.37.2}
WORK=${SVCNET_CONFORMANCE_DIR:-/var/tmp/svcnet-conformance}
E2E=$WORK/e2e.test-$K8S_VERSION
FOCUS=${FOCUS:-'\[sig-network\].*\[Conformance\]'}
SKIP=${SKIP:-'\[Serial\]|\[Disruptive\]|\[Flaky\]'}
NODES=${NODES:-3}
name=svcnet-conformance
svcnet=./bin/svcnet

if [ "$(id -u)" != 0 ]; then
	echo "make conformance needs root: svcnet's nodes and pods are network namespaces" >&2
	exit 1
fi
hack/e2e-build.sh "$E2E"

$svcnet down --name "$name" >/dev/null 2>&1 || true
trap '$svcnet down --name "$name" >/dev/null 2>&1 || true' EXIT
$svcnet up --name "$name" --nodes "$NODES" --no-ingress
kubeconfig=$($svcnet kubeconfig --name "$name")

report=${REPORT:-$WORK/report}
doc=${DOC:-docs/conformance.md}
notes=${NOTES:-docs/conformance-notes.md}
title=${TITLE:-"Kubernetes conformance: svcnet against Kubernetes' own e2e suite"}
rm -rf "$report"
mkdir -p "$report"
set +e
# The suite's test runner is on the host and reaches the cluster through
# the API server only (exec, proxy, port-forward), as a runner outside a
# real cluster does; nodes count as schedulable when they have no taints.
"$E2E" --provider local --kubeconfig "$kubeconfig" \
	--ginkgo.focus "$FOCUS" --ginkgo.skip "$SKIP" \
	--ginkgo.timeout 2h --ginkgo.no-color --ginkgo.v \
	--report-dir "$report" --allowed-not-ready-nodes 0 \
	--e2e-output-dir "$report" 2>&1 | tee "$report/e2e.log"
rc=${PIPESTATUS[0]}
set -e

if [ "${WRITE_DOC:-1}" = 1 ]; then
	go run ./hack/conformance-report \
		--junit "$report/junit_01.xml" --version "$K8S_VERSION" \
		--command "${RUN_NAME:-make conformance} (FOCUS='$FOCUS', SKIP='$SKIP', $NODES nodes), svcnet $(git rev-parse --short HEAD 2>/dev/null), $(grep -o 'Ran [0-9]* of [0-9]* Specs in [0-9.]* seconds' "$report/e2e.log" | tail -1)" \
		--notes "$notes" --title "$title" > "$doc"
	echo "conformance: $doc written"
fi
exit "$rc"
