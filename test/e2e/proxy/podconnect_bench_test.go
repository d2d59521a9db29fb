package proxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/bpflb"
	"github.com/svcnet/svcnet/internal/proxy"
	"github.com/svcnet/svcnet/internal/proxy/ebpf"
	"github.com/svcnet/svcnet/test/e2e/framework"
)

// podClientEnv makes the test binary the pod of BenchmarkPodConnect: it
// connects to the address it names (in the network namespace and cgroup
// it was started in), first one connect at a time timed, then
// connect-request-close as fast as it can, and prints what it measured.
const podClientEnv = "SVCNET_BENCH_POD_CLIENT"

// podResult is what the pod measured.
type podResult struct {
	Connects []time.Duration // one per connect
	Requests int             // connect, request, answer, close: how many
	Took     time.Duration   // for Requests
	CPU      time.Duration   // the process's user and system time
	Err      string
}

func init() {
	spec := os.Getenv(podClientEnv)
	if spec == "" {
		return
	}
	var target string
	var connects, requests int
	fmt.Sscan(spec, &target, &connects, &requests)
	res := podClient(target, connects, requests)
	var ru unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru)
	res.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	json.NewEncoder(os.Stdout).Encode(res)
	os.Exit(0)
}

func podClient(target string, connects, requests int) podResult {
	var r podResult
	d := net.Dialer{Timeout: 2 * time.Second}
	deadline := time.Now().Add(time.Minute)
	for i := 0; i < connects+20 && time.Now().Before(deadline); i++ {
		start := time.Now()
		c, err := d.Dial("tcp", target)
		took := time.Since(start)
		if err != nil {
			r.Err = err.Error()
			return r
		}
		_ = c.(*net.TCPConn).SetLinger(0)
		c.Close()
		if i >= 20 {
			r.Connects = append(r.Connects, took)
		}
	}
	buf := make([]byte, 64)
	start := time.Now()
	for r.Requests < requests && time.Now().Before(deadline) {
		c, err := d.Dial("tcp", target)
		if err != nil {
			r.Err = err.Error()
			return r
		}
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Write([]byte("hi\n")); err != nil {
			r.Err = err.Error()
			return r
		}
		if _, err := c.Read(buf); err != nil {
			r.Err = err.Error()
			return r
		}
		_ = c.(*net.TCPConn).SetLinger(0)
		c.Close()
		r.Requests++
	}
	r.Took = time.Since(start)
	return r
}

// BenchmarkPodConnect measures a pod's connections to a cluster IP in
// the nftables and the ebpf modes, beside each other: a pod namespace
// (its process in a cgroup of the test's own) routed through a node
// namespace to a server namespace, the node holding N services. The
// nftables mode's node DNATs the SYN; the ebpf mode's programs, attached
// to the pod's cgroup, give the connect the endpoint's address, and the
// node only routes. Figures: connect time (p50, p99), new connections
// per second (connect, one request, its answer, close, one at a time),
// and the pod's CPU time per connection.
//
//	go test ./test/e2e/proxy -run '^$' -bench PodConnect -benchtime 1x -timeout 60m
//
// SVCNET_FP_SIZES and SVCNET_FP_MODES choose a part of the rows, as for
// BenchmarkFirstPacket.
func BenchmarkPodConnect(b *testing.B) {
	framework.RequireRoot(b)
	sizes := []int{10, 30000}
	if env := os.Getenv("SVCNET_FP_SIZES"); env != "" {
		sizes = nil
		for _, f := range strings.Split(env, ",") {
			var n int
			fmt.Sscan(f, &n)
			sizes = append(sizes, n)
		}
	}
	modes := []string{"nftables", "ebpf"}
	if env := os.Getenv("SVCNET_FP_MODES"); env != "" {
		modes = strings.Split(env, ",")
	}
	for round := range firstPacketRounds {
		for _, n := range sizes {
			for _, mode := range modes {
				b.Run(fmt.Sprintf("round=%d/services=%d/mode=%s", round, n, mode), func(b *testing.B) {
					var r podResult
					for range b.N {
						r = podConnect(b, mode, n)
					}
					p50, p99 := framework.Percentile(r.Connects, 50), framework.Percentile(r.Connects, 99)
					rate := float64(r.Requests) / r.Took.Seconds()
					cpu := r.CPU / time.Duration(len(r.Connects)+r.Requests)
					b.ReportMetric(float64(p50.Microseconds()), "connect-p50-µs")
					b.ReportMetric(float64(p99.Microseconds()), "connect-p99-µs")
					b.ReportMetric(rate, "conn/s")
					b.ReportMetric(float64(cpu.Microseconds()), "cpu-µs/conn")
					b.ReportMetric(0, "ns/op")
					fmt.Printf("pod connect: %s mode, %d services: connect p50 %s p99 %s, %.0f connections/s, %s CPU per connection\n",
						mode, n, p50, p99, rate, cpu)
				})
			}
		}
	}
}

// podConnect sets up pod, node and server namespaces and the pod's
// cgroup, programs n services into the node (nftables) or the maps
// (ebpf), and runs the pod's client.
func podConnect(b *testing.B, mode string, n int) podResult {
	b.StopTimer()
	pod, node, server := routedNamespaces(b, "pc", "10.244.0")
	l := server.Listen("tcp", ":8080")
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if _, err := bufio.NewReader(c).ReadString('\n'); err == nil {
					c.Write([]byte("ok\n"))
				}
			}()
		}
	}()
	b.Cleanup(func() { l.Close() })
	mount, err := bpflb.Cgroup2Mount()
	if err != nil {
		b.Fatal(err)
	}
	cgroup := filepath.Join(mount, fmt.Sprintf("svcnet-bench-pod-%d", rand.IntN(1e9)))
	if err := os.Mkdir(cgroup, 0o755); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = os.Remove(cgroup) })

	tracker, target := oneEndpointServices(n)
	cfg := proxy.NodeConfig{Node: proxy.Node{Name: "node-a"}, ClusterCIDR: netipPrefix("10.244.0.0/16")}
	switch mode {
	case "nftables":
		if err := node.Do(func() error { return syncNFTablesOnce(v1.IPv4Protocol, tracker, cfg) }); err != nil {
			b.Fatal(err)
		}
	case "ebpf":
		lb, err := bpflb.Load(bpflb.Sizes{Services: 1 << 17, IDs: 1 << 16, Backends: 1 << 17, Sockets: 1 << 16, Affinities: 1024,
			Flows: 1024, Ranges: 1024}, bpflb.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { lb.Close() })
		if err := lb.Attach(cgroup); err != nil {
			b.Fatal(err)
		}
		k := ebpf.NewKernel(lb, nil)
		k.Fresh = true
		p, err := ebpf.NewProxier(ebpf.ProxierConfig{Rules: ebpf.Config{NodeConfig: cfg}, Sync: proxy.SyncerConfig{Tracker: tracker, Logger: quiet}, Kernel: k})
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Sync(context.Background()); err != nil {
			b.Fatal(err)
		}
	default:
		b.Fatalf("mode %s", mode)
	}
	time.Sleep(3 * time.Second) // the last run's namespaces go away

	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	fd, err := unix.Open(cgroup, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(fd)
	cmd := pod.Command(self)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %d %d", podClientEnv, target, firstPacketConnects, 5000))
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	b.StartTimer()
	out, err := cmd.Output()
	b.StopTimer()
	if err != nil {
		b.Fatalf("pod client: %v: %s", err, out)
	}
	var r podResult
	if err := json.Unmarshal(out, &r); err != nil {
		b.Fatalf("pod client said %q: %v", out, err)
	}
	if r.Err != "" {
		b.Fatalf("pod client: %s", r.Err)
	}
	return r
}
