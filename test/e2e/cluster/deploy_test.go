package cluster_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/loadgen"
	"github.com/svcnet/svcnet/test/e2e/framework"
)

// TestDeployManifests applies deploy/'s manifests with kubectl, as a user
// applies them to a real cluster, to a cluster started without a service
// proxy (svcnet up --proxy-mode none, as kubeadm without kube-proxy):
// before, a Service's ClusterIP and NodePort carry nothing; after, they
// do, the DNS of dns.yaml answers behind kube-dns, and ingress.yaml's
// controller routes an Ingress from
// its load-balancer address. Each component runs with its manifest's
// ServiceAccount and RBAC only: the API refused none of them anything.
func TestDeployManifests(t *testing.T) {
	t.Parallel()
	c := up(t, 2, "--proxy-mode", "none")
	k := c.kubectl
	k.MustRun(examples(t), "apply", "-f", "-")
	k.MustRun("", "rollout", "status", "deployment/hostnames", "--timeout=2m")
	clusterIP := k.MustRun("", "get", "service", "hostnames", "-o", "jsonpath={.spec.clusterIP}")
	client, node2 := "svcnet-"+c.name+"-client", "svcnet-"+c.name+"-node-2"
	targets := []loadgen.Target{
		{Name: "ClusterIP", URL: "http://" + clusterIP + ":80/", Rate: 20, Dial: nsDialer(node2)},
		{Name: "NodePort", URL: "http://172.18.0.11:8477/", Rate: 20, Dial: nsDialer(client)},
	}
	if k.MustRun("", "-n", "kube-system", "get", "daemonsets", "-o", "name") != "" {
		t.Fatal("--proxy-mode none installed a DaemonSet")
	}
	for _, tg := range targets {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		tg.Rate = 5
		r := loadgen.Run(ctx, tg)[0]
		cancel()
		if r.OK > 0 {
			t.Errorf("without a proxy, %s answered %d of %d requests", tg.Name, r.OK, r.Sent)
		}
	}

	// The API server as the nodes reach it: the kubernetes Service's
	// endpoint, not its ClusterIP (which the proxy is to make).
	api := k.MustRun("", "get", "endpointslices", "-l", "kubernetes.io/service-name=kubernetes",
		"-o", "jsonpath={.items[0].endpoints[0].addresses[0]}:{.items[0].ports[0].port}")
	manifests, err := exec.Command(framework.Binary(t), "manifests", "--api-server", "https://"+api,
		"--cluster-cidr", "10.244.0.0/16", "--dns-upstream", "none").Output()
	if err != nil {
		t.Fatalf("svcnet manifests: %v", err)
	}
	k.MustRun(string(manifests), "apply", "-f", "-")
	k.MustRun("", "-n", "kube-system", "rollout", "status", "daemonset/kube-proxy", "--timeout=2m")
	c.untilAnswering(targets...)
	if n := len(strings.Fields(k.MustRun("", "-n", "kube-system", "get", "pods", "-l", "k8s-app=kube-proxy", "-o", "name"))); n != 2 {
		t.Errorf("%d kube-proxy pods, want one per node (2)", n)
	}

	// The DNS, which svcnet up installed from dns.yaml too and which
	// reaches the API through the kubernetes Service: ready once a proxy
	// runs, behind kube-dns.
	k.MustRun("", "-n", "kube-system", "rollout", "status", "deployment/svcnet-dns", "--timeout=2m")
	c.until("dns.yaml's pods behind kube-dns", time.Minute, func() bool {
		out, _, _ := k.Run("", "-n", "kube-system", "get", "endpointslices", "-l", "kubernetes.io/service-name=kube-dns",
			"-o", "jsonpath={.items[*].endpoints[*].targetRef.name}")
		names := strings.Fields(out)
		return len(names) == 2 && strings.HasPrefix(names[0], "svcnet-dns-") && strings.HasPrefix(names[1], "svcnet-dns-")
	})
	c.until("hostnames resolved through kube-dns", time.Minute, func() bool {
		out, err := c.exec("node/node-1", "dig", "+short", "+time=1", "+tries=1", "@10.96.0.10", "hostnames.default.svc.cluster.local")
		return err == nil && strings.TrimSpace(out) == clusterIP
	})

	// The ingress controller, from its load-balancer address.
	k.MustRun("", "-n", "ingress-svcnet", "rollout", "status", "deployment/ingress-controller", "--timeout=2m")
	k.MustRun(example(t, "ingress.yaml"), "apply", "-f", "-")
	var edge string
	c.until("the ingress controller's load-balancer address", 30*time.Second, func() bool {
		edge, _, _ = k.Run("", "-n", "ingress-svcnet", "get", "service", "ingress-controller", "-o", "jsonpath={.status.loadBalancer.ingress[0].ip}")
		return strings.HasPrefix(edge, "172.18.255.")
	})
	c.until("hostnames through the ingress", time.Minute, func() bool {
		out, err := c.exec("client", "curl", "-s", "--max-time", "2", "-H", "Host: hostnames.example", edge+"/echo?msg=deployed")
		return err == nil && out == "deployed"
	})
	c.until("the Ingress's status to show the address", 30*time.Second, func() bool {
		out, _, _ := k.Run("", "get", "ingress", "hostnames", "-o", "jsonpath={.status.loadBalancer.ingress[0].ip}")
		return out == edge
	})

	// The controller's Events: an annotation it does not know is a
	// Warning on its Ingress (written with the manifest's RBAC).
	k.MustRun(`apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: odd
  annotations: {nginx.ingress.kubernetes.io/svcnet-test-unknown: "x"}
spec:
  rules:
  - host: odd.example
    http:
      paths: [{path: /, pathType: Prefix, backend: {service: {name: hostnames, port: {number: 80}}}}]
`, "apply", "-f", "-")
	c.until("the ingress controller's Warning on the odd Ingress", time.Minute, func() bool {
		out, _, _ := k.Run("", "get", "events", "--field-selector", "involvedObject.name=odd", "-o", "jsonpath={.items[*].reason}")
		return strings.Contains(out, "UnsupportedAnnotation")
	})

	// Enough RBAC: nothing refused, in any pod's log.
	for _, l := range []struct{ ns, selector string }{
		{"kube-system", "k8s-app=kube-proxy"}, {"kube-system", "app.kubernetes.io/name=svcnet-dns"}, {"ingress-svcnet", "app.kubernetes.io/name=ingress-controller"},
	} {
		out, _, err := k.Run("", "-n", l.ns, "logs", "-l", l.selector, "--all-containers", "--prefix", "--tail=-1")
		if err != nil || strings.Contains(strings.ToLower(out), "forbidden") {
			t.Errorf("%s logs (%v): refused by the API:\n%s", l.selector, err, out)
		}
	}
}
