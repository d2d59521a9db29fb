package sockdiag

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/bpflb"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// TestDestroyUDP: in a namespace of the test's own, a connected UDP
// socket is listed with its addresses and cookie, and once destroyed its
// owner's receive fails with ECONNABORTED; another socket is untouched.
func TestDestroyUDP(t *testing.T) {
	ns := netnstest.New(t, "sockdiag")
	err := netns.Do(ns, func() error {
		if err := loUp(ns); err != nil {
			return err
		}
		server, err := net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			return err
		}
		defer server.Close()
		victim, err := net.Dial("udp4", server.LocalAddr().String())
		if err != nil {
			return err
		}
		defer victim.Close()
		other, err := net.Dial("udp4", server.LocalAddr().String())
		if err != nil {
			return err
		}
		defer other.Close()
		socks, err := UDP(unix.AF_INET)
		if err != nil {
			return err
		}
		want := netip.MustParseAddrPort(victim.LocalAddr().String())
		var found *Socket
		for i, s := range socks {
			if s.Local == want {
				found = &socks[i]
			}
		}
		if found == nil {
			return fmt.Errorf("the victim %s is not among %v", want, socks)
		}
		if found.Remote.String() != server.LocalAddr().String() || found.Cookie == 0 {
			t.Errorf("listed as %+v", found)
		}
		if err := Destroy(*found); err != nil {
			return err
		}
		_ = victim.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err = victim.Read(make([]byte, 8))
		if !errors.Is(err, syscall.ECONNABORTED) {
			t.Errorf("the destroyed socket's read: %v, want ECONNABORTED", err)
		}
		if _, err := other.Write([]byte("x")); err != nil {
			t.Errorf("the other socket: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestDestroyInCgroup: the sockets of the namespaces a cgroup's
// processes live in are found and the matching ones destroyed.
func TestDestroyInCgroup(t *testing.T) {
	ns := netnstest.New(t, "sockdiag-cg")
	mount, err := bpflb.Cgroup2Mount()
	if err != nil {
		t.Fatal(err)
	}
	cg := filepath.Join(mount, fmt.Sprintf("svcnet-test-sockdiag-%d", rand.IntN(1e9)))
	if err := os.MkdirAll(filepath.Join(cg, "svcnet-pod"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(filepath.Join(cg, "svcnet-pod")); _ = os.Remove(cg) })
	// A process of the pod's group, in the namespace.
	fd, err := unix.Open(filepath.Join(cg, "svcnet-pod"), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	sleeper := exec.Command("ip", "netns", "exec", ns, "sleep", "60")
	sleeper.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() })
	var victim, other net.Conn
	var cookie uint64
	err = netns.Do(ns, func() error {
		if err := loUp(ns); err != nil {
			return err
		}
		if victim, err = net.Dial("udp4", "127.0.0.1:5353"); err != nil {
			return err
		}
		if other, err = net.Dial("udp4", "127.0.0.1:5354"); err != nil {
			return err
		}
		socks, err := UDP(unix.AF_INET)
		for _, s := range socks {
			if s.Local.String() == victim.LocalAddr().String() {
				cookie = s.Cookie
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer victim.Close()
	defer other.Close()
	// `ip netns exec` joins the namespace after it starts: wait until
	// the group's process is there.
	var want unix.Stat_t
	if err := unix.Stat(netns.Path(ns), &want); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		var st unix.Stat_t
		if unix.Stat(fmt.Sprintf("/proc/%d/ns/net", sleeper.Process.Pid), &st) == nil && st.Ino == want.Ino {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the group's process never entered the namespace")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// By cookie, as the ebpf mode matches: a socket's cookie is unique on
	// the machine, so no other namespace's socket can match.
	n, err := DestroyInCgroup(cg, func(s Socket) bool { return s.Cookie == cookie })
	if err != nil || n != 1 {
		t.Fatalf("destroyed %d (%v), want 1", n, err)
	}
	_ = victim.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := victim.Read(make([]byte, 8)); !errors.Is(err, syscall.ECONNABORTED) {
		t.Errorf("the destroyed socket's read: %v, want ECONNABORTED", err)
	}
	if _, err := other.Write([]byte("x")); err != nil {
		t.Errorf("the other socket: %v", err)
	}
}

// loUp brings the loopback of namespace ns up.
func loUp(ns string) error {
	h, err := netns.Handle(ns)
	if err != nil {
		return err
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		return err
	}
	return h.LinkSetUp(lo)
}
