#!/usr/bin/env bash
# `make run`: a 3-node svcnet cluster with the reference scenario
# (examples/hostnames.yaml), shown from outside and from inside.
set -euo pipefail
cd "$(dirname "$0")/.."
name="${SVCNET_CLUSTER:-svcnet}"
svcnet=./bin/svcnet

if [ "$(id -u)" != 0 ]; then
	echo "make run needs root: svcnet's nodes and pods are network namespaces (sudo make run)" >&2
	exit 1
fi
# A fresh cluster each time.
$svcnet down --name "$name" >/dev/null 2>&1 || true
$svcnet up --name "$name" --nodes 3 --service-node-port-range 8000-32767
export KUBECONFIG="$($svcnet kubeconfig --name "$name")"

echo
echo "==> kubectl apply -f examples/hostnames.yaml"
kubectl apply -f examples/hostnames.yaml
kubectl rollout status deployment/hostnames --timeout=90s
kubectl get pods,services,endpointslices -o wide

echo
echo "==> From outside the cluster: curl <each node>:8477 (NodePort), 3 times each"
for node in 172.18.0.11 172.18.0.12 172.18.0.13; do
	for _ in 1 2 3; do
		printf '%s:8477 -> ' "$node"
		$svcnet exec --name "$name" client -- curl -s --max-time 2 "$node:8477" || echo "(no answer)"
	done
done

pod=$(kubectl get pods -l app=hostnames -o jsonpath='{.items[0].metadata.name}')
echo
echo "==> From pod $pod: curl hostnames (DNS, then the cluster IP)"
for _ in 1 2 3; do
	$svcnet exec --name "$name" "default/$pod" -- curl -s --max-time 2 hostnames || echo "(no answer)"
done

echo
echo "==> kubectl apply -f examples/ingress.yaml (hostnames.example -> hostnames:80, /echo -> echo:80)"
kubectl apply -f examples/ingress.yaml
kubectl rollout status deployment/echo --timeout=90s
edge=""
for _ in $(seq 1 60); do
	edge=$(kubectl -n ingress-svcnet get service ingress-controller -o jsonpath='{.status.loadBalancer.ingress[0].ip}')
	[ -n "$edge" ] && break
	sleep 0.5
done
kubectl get ingress hostnames
echo "==> From outside the cluster: curl -H 'Host: hostnames.example' $edge (the ingress), 3 times, then /echo"
# from_client ADDRESS: hostnames.example/ from the outside client, 3 times.
from_client() {
	for _ in 1 2 3; do
		printf 'hostnames.example/ -> '
		$svcnet exec --name "$name" client -- curl -s --max-time 2 -H 'Host: hostnames.example' "http://$1/" || echo "(no answer)"
	done
}
from_client "$edge"
printf 'hostnames.example/echo?msg=hello -> '
$svcnet exec --name "$name" client -- curl -s --max-time 2 -H 'Host: hostnames.example' "http://$edge/echo?msg=hello" || echo "(no answer)"
echo

echo
echo "==> kubectl apply -f examples/gateway.yaml (the same through the Gateway API: Gateway web, HTTPRoute hostnames)"
kubectl apply -f examples/gateway.yaml
kubectl wait --for=condition=Programmed --timeout=60s gateway/web
gw=$(kubectl get gateway web -o jsonpath='{.status.addresses[0].value}')
kubectl get gateway web
kubectl get httproute hostnames
echo "==> From outside the cluster: curl -H 'Host: hostnames.example' $gw (the Gateway), 3 times"
from_client "$gw"

echo
echo "==> On node-1: iptables-save -t nat | grep hostnames"
$svcnet exec --name "$name" node/node-1 -- iptables-save -t nat | grep -E 'hostnames|KUBE-SVC-|KUBE-SEP-' | grep hostnames || true

cat <<MSG

The cluster keeps running in the background. Try:
  export KUBECONFIG=$KUBECONFIG
  kubectl scale deployment hostnames --replicas=5
  $svcnet exec --name $name client -- curl -s 172.18.0.12:8477
  $svcnet exec --name $name client -- curl -s -H 'Host: hostnames.example' http://$edge/
  $svcnet exec --name $name client -- curl -s -H 'Host: hostnames.example' http://$gw/
  $svcnet status --name $name
  $svcnet down --name $name          # removes everything it made
MSG
