package pods

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	ggcrtypes "github.com/google/go-containerregistry/pkg/v1/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svcnet/svcnet/internal/imagestore"
	"github.com/svcnet/svcnet/internal/imagestore/imagetest"
	"github.com/svcnet/svcnet/internal/imagestore/registrytest"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/node/podstate"
	"github.com/svcnet/svcnet/internal/node/runtime"
	"github.com/svcnet/svcnet/internal/node/users"
)

// The pull-and-start benchmark (docs/benchmarks.md; bench/pull-vs-containerd.sh
// runs it beside containerd's `ctr images pull` and `ctr run`).
var (
	benchSvcnet = flag.String("pull.svcnet", "",
		"the svcnet binary containers are started with (`svcnet internal container-shim`, as the agent does); empty: this test binary")
	benchServe = flag.String("pull.serve", "",
		"TestServeBenchImage: serve the benchmark image on 127.0.0.1 and write its reference to this file")
	benchServeFor = flag.Duration("pull.serve-for", 30*time.Minute,
		"TestServeBenchImage: stop serving after this long (or on SIGTERM, or when the file is removed)")
)

// benchRepoTag is the benchmark image's name in the registry.
const benchRepoTag = "bench/big:1"

// benchCommand is what the benchmark's containers run: it is running
// once "up" is in its log (ctr's output for containerd).
var benchCommand = []string{"/bin/busybox", "sh", "-c", "echo up; exec /bin/busybox sleep 120"}

// benchImage builds the benchmark's image into dir: the Busybox base and
// a layer of 1,000 files of random bytes (4 to 120 KiB, 49.8 MiB in all,
// in 50 directories), each layer gzip-compressed (the default level, as
// image builders do), in OCI media types for this machine's platform.
// The bytes come from a fixed seed, so every build is the same image, by
// digest: the benchmark's and the registry that containerd pulls from
// serve identical blobs.
func benchImage(tb testing.TB, dir string) v1.Image {
	tb.Helper()
	var files bytes.Buffer
	tw := tar.NewWriter(&files)
	rng := rand.New(rand.NewChaCha8([32]byte{'s', 'v', 'c', 'n', 'e', 't'}))
	mtime := time.Unix(1700000000, 0)
	sizes := []int{4 << 10, 16 << 10, 64 << 10, 120 << 10}
	buf := make([]byte, 120<<10)
	for d := range 50 {
		dirName := fmt.Sprintf("data/d%02d/", d)
		if err := tw.WriteHeader(&tar.Header{Name: dirName, Typeflag: tar.TypeDir, Mode: 0o755, ModTime: mtime}); err != nil {
			tb.Fatal(err)
		}
		for f := range 20 {
			n := sizes[f%len(sizes)]
			for i := 0; i < n; i += 8 {
				v := rng.Uint64()
				for j := range 8 {
					buf[i+j] = byte(v >> (8 * j))
				}
			}
			hdr := &tar.Header{Name: fmt.Sprintf("%sf%02d.bin", dirName, f), Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(n), ModTime: mtime}
			if err := tw.WriteHeader(hdr); err != nil {
				tb.Fatal(err)
			}
			if _, err := tw.Write(buf[:n]); err != nil {
				tb.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		tb.Fatal(err)
	}
	img := mutate.MediaType(empty.Image, ggcrtypes.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, ggcrtypes.OCIConfigJSON)
	for i, tarStream := range []io.Reader{imagetest.Busybox(tb), &files} {
		path := filepath.Join(dir, fmt.Sprintf("layer%d.tar.gz", i))
		f, err := os.Create(path)
		if err != nil {
			tb.Fatal(err)
		}
		zw := gzip.NewWriter(f)
		_, err = io.Copy(zw, tarStream)
		err = errors.Join(err, zw.Close(), f.Close())
		if err != nil {
			tb.Fatal(err)
		}
		l, err := tarball.LayerFromFile(path, tarball.WithMediaType(ggcrtypes.OCILayer))
		if err != nil {
			tb.Fatal(err)
		}
		if img, err = mutate.AppendLayers(img, l); err != nil {
			tb.Fatal(err)
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		tb.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", goruntime.GOARCH
	cf.Created = v1.Time{Time: mtime}
	cf.Config.Env = []string{"PATH=/bin"}
	cf.Config.Cmd = []string{"/bin/sh"}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		tb.Fatal(err)
	}
	return img
}

// serveBenchImage serves a registry on a new listener on 127.0.0.1 with
// the benchmark image pushed, and returns its reference.
func serveBenchImage(tb testing.TB) (ref string, size int64, reg *registrytest.Registry) {
	tb.Helper()
	if _, err := os.Stat("/bin/busybox"); err != nil {
		tb.Skip("needs a static /bin/busybox (Debian's busybox-static)")
	}
	start := time.Now()
	img := benchImage(tb, tb.TempDir())
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	reg = registrytest.New(l)
	tb.Cleanup(func() { reg.Close() })
	ref = reg.Push(tb, benchRepoTag, img)
	m, err := img.Manifest()
	if err != nil {
		tb.Fatal(err)
	}
	for _, d := range m.Layers {
		size += d.Size
	}
	digest, _ := img.Digest()
	tb.Logf("image %s (%s): %.1f MiB of layers, built and pushed in %v", ref, digest, float64(size)/(1<<20), time.Since(start).Round(time.Millisecond))
	return ref, size, reg
}

// TestServeBenchImage serves the benchmark's image for containerd's side
// of the comparison (bench/pull-vs-containerd.sh): a registry on
// 127.0.0.1 in plain HTTP, the same code and image as BenchmarkPullStart
// pulls from. It writes the image's reference to -pull.serve once it is
// pushed, and serves until SIGTERM or SIGINT, the file's removal, or
// -pull.serve-for. Without -pull.serve it is skipped.
func TestServeBenchImage(t *testing.T) {
	if *benchServe == "" {
		t.Skip("serves the pull benchmark's image only when asked: -pull.serve FILE")
	}
	ref, _, _ := serveBenchImage(t)
	tmp := *benchServe + ".tmp"
	if err := os.WriteFile(tmp, []byte(ref+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, *benchServe); err != nil {
		t.Fatal(err)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	deadline := time.After(*benchServeFor)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case s := <-sigs:
			t.Logf("stopping on %v", s)
			return
		case <-deadline:
			t.Logf("stopping after %v", *benchServeFor)
			return
		case <-tick.C:
			if _, err := os.Stat(*benchServe); err != nil {
				return
			}
		}
	}
}

// benchNode is the agent as the benchmark's pods see it: nothing but
// events, which it drops.
type benchNode struct{ testNode }

func (benchNode) Event(*corev1.Pod, string, string, string, ...any) {}

// benchNetwork gives each pod a network namespace of its own with only
// its loopback, svcnet-bench-…, as `ctr run` without --net-host does:
// nothing leads to the host. The agent's own wiring (a veth into the
// node's bridge, an address, a route) is left out, as containerd's CNI is.
type benchNetwork struct{ prefix string }

func (n benchNetwork) name(uid string) string { return n.prefix + uid[len(uid)-6:] }

func (n benchNetwork) Setup(uid string) (netip.Addr, string, error) {
	ns := n.name(uid)
	if err := netns.Create(ns); err != nil {
		return netip.Addr{}, "", err
	}
	return netip.MustParseAddr("10.244.0.7"), ns, nil
}

func (n benchNetwork) Teardown(uid string) { _ = netns.Delete(n.name(uid)) }

// BenchmarkPullStart measures, from a registry on loopback (plain HTTP),
// the first pull of a 51 MiB image (benchImage) into an empty store,
// with its verification and unpacking, followed by the start of a pod
// running it, until its command runs ("up" in its log); then the start
// of a second pod of the same image, its layers in the store, beside the
// first. Pods get what the agent gives them: a network namespace (of
// loopback only here: benchNetwork), the pod's IPC and UTS namespaces,
// a PID and a mount namespace of the container's own over an overlayfs
// root of the image's layers, a user of the pod's own. The figures are
// the medians over b.N iterations (each with a new store), in ms:
// first-ms (pull and start), pull-ms (of it, the pull), second-ms.
//
//	go test ./internal/node/pods -run - -bench PullStart -benchtime 5x [-pull.svcnet bin/svcnet]
func BenchmarkPullStart(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("unpacking layers, namespaces and overlay roots need root")
	}
	self := *benchSvcnet
	if self == "" {
		var err error
		if self, err = os.Executable(); err != nil {
			b.Fatal(err)
		}
	}
	if abs, err := filepath.Abs(self); err == nil {
		self = abs
	}
	ref, size, reg := serveBenchImage(b)
	tmp := b.TempDir()
	alloc, err := users.Open(filepath.Join(tmp, "users"))
	if err != nil {
		b.Fatal(err)
	}
	prefix := fmt.Sprintf("svcnet-bench-%d-", rand.IntN(1e6))
	network := benchNetwork{prefix: prefix}
	// The pods of the iteration running: a failed one leaves them to
	// the cleanup.
	var live []*Pod
	b.Cleanup(func() {
		for _, p := range live {
			benchStop(b, p)
		}
		// Whatever else a failed iteration left: containers by their
		// shims' state directories, network namespaces.
		dirs, _ := filepath.Glob(filepath.Join(tmp, "pod-*", "*.run"))
		for _, d := range dirs {
			runtime.Kill(d)
		}
		left, _ := netns.List(prefix)
		for _, ns := range left {
			if err := netns.Delete(ns); err != nil {
				b.Error(err)
			}
		}
	})

	var first, pull, second []float64
	n := 0
	for b.Loop() {
		storeDir := filepath.Join(tmp, fmt.Sprintf("images-%d", n))
		store, err := imagestore.Open(storeDir)
		if err != nil {
			b.Fatal(err)
		}
		rt := &Runtime{Self: self, NodeIP: netip.MustParseAddr("10.0.0.1"), ClusterDNS: "10.96.0.10",
			ClusterDomain: "cluster.local", Net: network, Node: benchNode{}, Images: store, Users: alloc}
		gets := reg.AllBlobGets()

		t0 := time.Now()
		img, err := store.Pull(context.Background(), ref, imagestore.PullOptions{})
		if err != nil {
			b.Fatal(err)
		}
		tPulled := time.Now()
		p1 := benchPod(b, rt, ref, tmp, n*2)
		tFirst := time.Now()
		live = append(live, p1)
		p2 := benchPod(b, rt, ref, tmp, n*2+1)
		tSecond := time.Now()
		live = append(live, p2)

		// Its config and every layer, from the registry: the store was
		// empty.
		if got := reg.AllBlobGets() - gets; got != len(img.Layers)+1 {
			b.Fatalf("the pull fetched %d blobs, want the image's config and %d layers", got, len(img.Layers))
		}
		first = append(first, ms(tFirst.Sub(t0)))
		pull = append(pull, ms(tPulled.Sub(t0)))
		second = append(second, ms(tSecond.Sub(tFirst)))
		b.Logf("iteration %d: pull %.0f ms + start %.0f ms = first %.0f ms; second pod %.0f ms",
			n+1, pull[n], first[n]-pull[n], first[n], second[n])

		b.StopTimer()
		for _, p := range live {
			benchStop(b, p)
		}
		live = nil
		if err := os.RemoveAll(storeDir); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		n++
	}
	b.ReportMetric(median(first), "first-ms")
	b.ReportMetric(median(pull), "pull-ms")
	b.ReportMetric(median(second), "second-ms")
	b.ReportMetric(float64(size)/(1<<20), "image-MiB")
	b.ReportMetric(0, "ns/op")
}

// benchPod starts pod number i, of one container running benchCommand
// from the benchmark's image, and returns once its command runs.
func benchPod(tb testing.TB, rt *Runtime, image, dir string, i int) *Pod {
	tb.Helper()
	spec := corev1.Container{Name: "c", Image: image, Command: benchCommand}
	uid := types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i))
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprint("bench-", i), UID: uid},
		Spec: corev1.PodSpec{Containers: []corev1.Container{spec}}}
	p := New(rt, pod, filepath.Join(dir, fmt.Sprint("pod-", i)), []*podstate.Container{podstate.NewContainer(spec, false)}, func(*ExecInfo) {})
	ctx := context.Background()
	if !p.EnsureSandbox(ctx) {
		p.Remove()
		tb.Fatal("sandbox:", p.SandboxErr())
	}
	p.Start(ctx, "c")
	c := p.Container("c")
	if c.proc == nil {
		p.Remove()
		tb.Fatalf("not started: %+v", c.State.Waiting)
	}
	log := p.logPath(c)
	deadline := time.Now().Add(30 * time.Second)
	for !loggedUp(log) {
		select {
		case e := <-p.Exits():
			run, _ := os.ReadFile(filepath.Join(p.runDir(c), "shim.log"))
			out, _ := os.ReadFile(log)
			p.Remove()
			tb.Fatalf("the container ended with %d:\n%s\n%s", e.code, out, run)
		default:
		}
		if time.Now().After(deadline) {
			runtime.Kill(p.runDir(c))
			p.Remove()
			tb.Fatal("no \"up\" in the container's log after 30s")
		}
		time.Sleep(500 * time.Microsecond)
	}
	return p
}

// loggedUp reports whether the container's log (CRI format: time,
// stream, tag, line) has the line "up".
func loggedUp(path string) bool {
	data, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if f := strings.SplitN(line, " ", 4); len(f) == 4 && f[3] == "up" {
			return true
		}
	}
	return false
}

// benchStop kills the pod's container, waits for its end, and removes
// the pod.
func benchStop(tb testing.TB, p *Pod) {
	tb.Helper()
	c := p.Container("c")
	runtime.Kill(p.runDir(c))
	select {
	case <-p.Exits():
	case <-time.After(30 * time.Second):
		tb.Error("the container did not end after SIGKILL")
	}
	p.Remove()
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
