#!/usr/bin/env bash
# make gateway-conformance: the Gateway API's own conformance suite
# (sigs.k8s.io/gateway-api/conformance, the version of
# test/gateway-conformance/go.mod) against a fresh `svcnet up`, run as
# implementations run it, and its report in docs/gateway-conformance.md.
#
# The suite sends its requests to the Gateways' addresses, which only the
# cluster's outside client reaches: it runs in the client's network
# namespace (svcnet exec client), with a kubeconfig for the API server's
# address inside the cluster. It learns the features to test from the
# GatewayClass's status.supportedFeatures, as the suite does when none
# are named. make test runs it too, with WRITE_DOC=0.
set -euo pipefail
cd "$(dirname "$0")/.."

WORK=${SVCNET_GATEWAY_CONFORMANCE_DIR:-/var/tmp/svcnet-gateway-conformance}
PROFILES=${PROFILES:-GATEWAY-HTTP,GATEWAY-GRPC,GATEWAY-TLS}
NODES=${NODES:-2}
DOC=${DOC:-docs/gateway-conformance.md}
name=svcnet-gwconf
svcnet=$PWD/bin/svcnet

if [ "$(id -u)" != 0 ]; then
	echo "make gateway-conformance needs root: svcnet's nodes and pods are network namespaces" >&2
	exit 1
fi
mkdir -p "$WORK"
suite=$WORK/conformance.test
echo "==> building the suite (test/gateway-conformance)"
(cd test/gateway-conformance && go test -c -o "$suite" sigs.k8s.io/gateway-api/conformance)
version=$(cd test/gateway-conformance && go list -m -f '{{.Version}}' sigs.k8s.io/gateway-api/conformance)

$svcnet down --name "$name" >/dev/null 2>&1 || true
trap '$svcnet down --name "$name" >/dev/null 2>&1 || true' EXIT
$svcnet up --name "$name" --nodes "$NODES"
kubeconfig=$($svcnet kubeconfig --name "$name")
export KUBECONFIG=$kubeconfig
kubectl wait --for=condition=Accepted --timeout=60s gatewayclass/svcnet
inside=$(kubectl get endpointslices -n default -l kubernetes.io/service-name=kubernetes \
	-o jsonpath='{.items[0].endpoints[0].addresses[0]}:{.items[0].ports[0].port}')
sed -E "s#server: https://[^ ]+#server: https://$inside#" "$kubeconfig" > "$WORK/kubeconfig"

report=$WORK/report.yaml
log=$WORK/conformance.log
rm -f "$report" "$log"
echo "==> the suite $version, profiles $PROFILES, from the outside client (API at $inside)"
set +e
$svcnet exec --name "$name" client -- env KUBECONFIG="$WORK/kubeconfig" HOME="$WORK" "$suite" \
	-test.run '^TestConformance$' -test.v -test.timeout 3h \
	--gateway-class=svcnet --conformance-profiles="$PROFILES" --report-output="$report" \
	--organization=svcnet --project=svcnet --url=https://github.com/svcnet/svcnet \
	--version="$(git rev-parse --short HEAD)" --contact=https://github.com/svcnet/svcnet/issues \
	${EXTRA_ARGS:-} 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e

if [ "${WRITE_DOC:-1}" = 1 ] && [ -s "$report" ]; then
	(cd test/gateway-conformance && go run ./report --report "$report" --log "$log" \
		--command "make gateway-conformance (PROFILES=$PROFILES, $NODES nodes), svcnet $(git rev-parse --short HEAD), suite $version") > "$DOC"
	echo "gateway-conformance: $DOC written"
fi
exit "$rc"
