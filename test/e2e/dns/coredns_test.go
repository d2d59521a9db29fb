package dns_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// coreDNS is a CoreDNS the benchmark measures side by side with svcnet
// dns (-dns.coredns), configured as kubeadm deploys it: the kubernetes
// plugin, prometheus, forward and cache 30. The plugins that bind fixed
// ports or query themselves (health, ready, loop, reload) are left out;
// none of them does per-query work.
type coreDNS struct {
	addr    string
	metrics string
	cmd     *exec.Cmd
	mu      sync.Mutex
	logs    strings.Builder
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
	dir := b.TempDir()
	port, mport := freePort(b), freePort(b)
	conf := filepath.Join(dir, "Corefile")
	if err := os.WriteFile(conf, fmt.Appendf(nil, corefile, port, kubeconfig, mport, upstream), 0o644); err != nil {
		b.Fatal(err)
	}
	c := &coreDNS{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), metrics: fmt.Sprintf("http://127.0.0.1:%d/metrics", mport)}
	c.cmd = exec.Command(bin, "-conf", conf)
	if cpus != "" {
		c.cmd = exec.Command("taskset", "-c", cpus, bin, "-conf", conf)
	}
	c.cmd.Dir = dir
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	c.cmd.Stdout, c.cmd.Stderr = c, c
	if err := c.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		c.stop()
		if b.Failed() {
			b.Logf("CoreDNS logs:\n%s", c.String())
		}
	})
	return c
}

func (c *coreDNS) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.logs.Write(p)
}

func (c *coreDNS) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.logs.String()
}

func (c *coreDNS) stop() {
	if c.cmd.ProcessState == nil {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = c.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = c.cmd.Process.Kill()
			<-done
		}
	}
}

// cpuSeconds reads CoreDNS's process_cpu_seconds_total.
func (c *coreDNS) cpuSeconds(b *testing.B) float64 {
	b.Helper()
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(c.metrics)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	v := metricValue(string(body), "process_cpu_seconds_total")
	if v == 0 {
		b.Fatalf("CoreDNS /metrics has no process_cpu_seconds_total:\n%s", c.String())
	}
	return v
}

// freePort is a loopback port free for UDP and TCP a moment ago.
func freePort(b *testing.B) int {
	b.Helper()
	for range 20 {
		u, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			b.Fatal(err)
		}
		port := u.LocalAddr().(*net.UDPAddr).Port
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		u.Close()
		if err == nil {
			l.Close()
			return port
		}
	}
	b.Fatal("no loopback port free for UDP and TCP")
	return 0
}
