#!/usr/bin/env bash
# `make run`: start svcnet with the reference scenario (examples/hostnames.yaml).
set -euo pipefail
cd "$(dirname "$0")/.."
state="${SVCNET_STATE:-$HOME/.svcnet/run}"
mkdir -p "$state"
port="${SVCNET_PORT:-6443}"

echo "==> starting the svcnet API server (state in $state)"
./bin/svcnet apiserver --data-dir "$state" --secure-port "$port" \
	--service-node-port-range 8000-32767 >"$state/apiserver.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null' EXIT INT TERM
export KUBECONFIG="$state/kubeconfigs/admin.kubeconfig"
for _ in $(seq 100); do
	if curl -skf "https://127.0.0.1:$port/readyz" >/dev/null; then break; fi
	if ! kill -0 $pid 2>/dev/null; then cat "$state/apiserver.log"; exit 1; fi
	sleep 0.2
done
echo "==> applying the reference scenario: examples/hostnames.yaml"
kubectl apply -f examples/hostnames.yaml
kubectl get deployments,services -o wide
cat <<MSG

The API server is running; try, in another shell:
  export KUBECONFIG=$KUBECONFIG
  kubectl get all
  kubectl describe service hostnames

Not yet here: the controllers, the nodes and pods in network namespaces
(svcnet up), the service proxy and the cluster DNS (issues 3-6). Until
then the Deployment has no pods. Press Ctrl-C to stop.
MSG
wait $pid
