package framework

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netns"
)

// NetnsPrefix starts the name of every network namespace a test makes,
// so that leftovers are easy to find (`ip netns list | grep svcnet-test-`).
const NetnsPrefix = "svcnet-test-"

// RequireRoot skips t unless it runs as root, which making network
// namespaces and programming their netfilter needs. CI runs as root, so
// there these tests always run.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipped: needs root to create network namespaces and program their netfilter (CI runs as root)")
	}
}

// Netns is a network namespace that one test made and removes when it
// ends, with whatever runs in it. Every command it runs targets the
// namespace explicitly (`ip -n NAME`, `ip netns exec NAME`): nothing of
// the host's network is ever changed.
type Netns struct {
	t    testing.TB
	Name string
}

// NewNetns makes the namespace svcnet-test-<what>-<random> with its
// loopback up, and removes it when t ends, also when t fails.
func NewNetns(t testing.TB, what string) *Netns {
	t.Helper()
	RequireRoot(t)
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	n := &Netns{t: t, Name: NetnsPrefix + what + "-" + hex.EncodeToString(b)}
	if out, err := exec.Command("ip", "netns", "add", n.Name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", n.Name, err, out)
	}
	t.Cleanup(n.remove)
	n.IP("link", "set", "lo", "up")
	return n
}

// remove kills what still runs in the namespace (only processes a test
// started there can be in it) and deletes it, which also deletes its
// links and their veth peers.
func (n *Netns) remove() {
	if !strings.HasPrefix(n.Name, NetnsPrefix) {
		return
	}
	if out, err := exec.Command("ip", "netns", "pids", n.Name).Output(); err == nil {
		for _, f := range strings.Fields(string(out)) {
			var pid int
			if _, err := fmt.Sscan(f, &pid); err == nil && pid > 1 && pid != os.Getpid() {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	for i := 0; i < 50; i++ {
		out, err := exec.Command("ip", "netns", "del", n.Name).CombinedOutput()
		if err == nil || strings.Contains(string(out), "No such file") {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	n.t.Errorf("could not delete network namespace %s; remove it with: ip netns del %s", n.Name, n.Name)
}

// Command returns cmd prepared to run inside the namespace.
func (n *Netns) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", n.Name, name}, args...)...)
}

// Try runs a command inside the namespace and returns its combined output.
func (n *Netns) Try(name string, args ...string) (string, error) {
	out, err := n.Command(name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("in %s: %s %s: %w: %s", n.Name, name, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// Run runs a command inside the namespace and fails t if it fails.
func (n *Netns) Run(name string, args ...string) string {
	n.t.Helper()
	out, err := n.Try(name, args...)
	if err != nil {
		n.t.Fatal(err)
	}
	return out
}

// IP runs `ip -n NAME args…`.
func (n *Netns) IP(args ...string) {
	n.t.Helper()
	if out, err := exec.Command("ip", append([]string{"-n", n.Name}, args...)...).CombinedOutput(); err != nil {
		n.t.Fatalf("ip -n %s %s: %v: %s", n.Name, strings.Join(args, " "), err, out)
	}
}

// Sysctl sets a sysctl inside the namespace only.
func (n *Netns) Sysctl(key, value string) {
	n.t.Helper()
	n.Run("sysctl", "-q", "-w", key+"="+value)
}

// Do runs fn on an OS thread that is inside the namespace. Sockets fn
// creates stay in the namespace for their whole life, whichever thread
// later uses them; that is how a test serves and dials inside a
// namespace from its own process.
func (n *Netns) Do(fn func() error) error {
	target, err := netns.GetFromName(n.Name)
	if err != nil {
		return fmt.Errorf("open netns %s: %w", n.Name, err)
	}
	defer target.Close()
	errCh := make(chan error, 1)
	// A fresh goroutine whose thread is thrown away if it cannot go back:
	// a thread left in the wrong namespace would leak into other code.
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errCh <- err
			return
		}
		defer orig.Close()
		if err := netns.Set(target); err != nil {
			errCh <- fmt.Errorf("enter netns %s: %w", n.Name, err)
			return
		}
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			errCh <- fmt.Errorf("leave netns %s: %w", n.Name, err)
			return // the thread stays locked and exits with the goroutine
		}
		runtime.UnlockOSThread()
		errCh <- ferr
	}()
	return <-errCh
}

// Listen listens inside the namespace; the listener is closed when the
// test ends.
func (n *Netns) Listen(network, addr string) net.Listener {
	n.t.Helper()
	return listenIn(n, network, addr, net.Listen)
}

// ListenPacket is Listen for UDP.
func (n *Netns) ListenPacket(network, addr string) net.PacketConn {
	n.t.Helper()
	return listenIn(n, network, addr, net.ListenPacket)
}

// listenIn calls listen inside n and closes what it opens when the test
// ends.
func listenIn[L io.Closer](n *Netns, network, addr string, listen func(network, addr string) (L, error)) L {
	n.t.Helper()
	var l L
	if err := n.Do(func() (err error) { l, err = listen(network, addr); return err }); err != nil {
		n.t.Fatalf("listen %s %s in %s: %v", network, addr, n.Name, err)
	}
	n.t.Cleanup(func() { _ = l.Close() })
	return l
}

// DialContext connects from inside the namespace.
func (n *Netns) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := n.Do(func() (err error) {
		d := net.Dialer{Timeout: 5 * time.Second}
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// HTTPClient is a client whose connections start inside the namespace,
// one per request, so that every request is a new connection that the
// node's rules balance afresh.
func (n *Netns) HTTPClient(timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			DialContext:       n.DialContext,
			DisableKeepAlives: true,
			Proxy:             nil,
		},
	}
}
