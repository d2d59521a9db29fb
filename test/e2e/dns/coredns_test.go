package dns_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/freeport"
	"github.com/svcnet/svcnet/test/e2e/framework"
)

// coreDNS is a CoreDNS the benchmark measures side by side with svcnet
// dns (-dns.coredns), configured as kubeadm deploys it: the kubernetes
// plugin, prometheus, forward and cache 30. The plugins that bind fixed
// ports or query themselves (health, ready, loop, reload) are left out;
// none of them does per-query work.
type coreDNS struct {
	addr    string
	metrics string
	proc    *framework.Process
}

const corefile = `.:%d {
    bind 127.0.0.1
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig %s
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }
    prometheus 127.0.0.1:%d
    forward . %s
    cache 30
    loadbalance
}
`

// startCoreDNS runs bin bound to cpus ("" for any) against the API
// server behind kubeconfig, forwarding outside names to upstream.
func startCoreDNS(b *testing.B, bin, cpus, kubeconfig, upstream string) *coreDNS {
	b.Helper()
	return startCoreDNSConf(b, bin, cpus, kubeconfig, upstream, true)
}

// startCoreDNSConf is startCoreDNS with or without the cache plugin.
func startCoreDNSConf(b testing.TB, bin, cpus, kubeconfig, upstream string, cache bool) *coreDNS {
	b.Helper()
	conf := corefile
	if !cache {
		conf = strings.Replace(conf, "    cache 30\n", "", 1)
	}
	dir := b.TempDir()
	port, mport := freeport.Port(b), freeport.Port(b)
	path := filepath.Join(dir, "Corefile")
	if err := os.WriteFile(path, fmt.Appendf(nil, conf, port, kubeconfig, mport, upstream), 0o644); err != nil {
		b.Fatal(err)
	}
	return &coreDNS{addr: fmt.Sprintf("127.0.0.1:%d", port), metrics: fmt.Sprintf("http://127.0.0.1:%d/metrics", mport),
		proc: framework.StartCommandOnCPUs(b, cpus, bin, "-conf", path)}
}
