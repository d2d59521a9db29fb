// Package netns creates and enters the named network namespaces svcnet's
// cluster lives in (nodes, pods, the underlay, the outside client, the
// edge load balancer), and runs code inside them: listeners, dialers,
// sysctls and netlink handles. Everything it creates is named svcnet-….
// It never changes the namespace the calling process runs in.
package netns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
)

// Dir is where `ip netns` keeps named namespaces.
const Dir = "/run/netns"

// Path is the file of the named namespace; a name that is an absolute
// path ("/proc/123/ns/net", a process's namespace) is its own file.
func Path(name string) string {
	if filepath.IsAbs(name) {
		return name
	}
	return filepath.Join(Dir, name)
}

// Exists reports whether the named namespace exists.
func Exists(name string) bool {
	_, err := os.Stat(Path(name))
	return err == nil
}

// Create makes the named namespace with its loopback up; an existing one
// is kept.
func Create(name string) error {
	if !strings.HasPrefix(name, "svcnet-") {
		return fmt.Errorf("refusing to create namespace %q: svcnet's namespaces are named svcnet-…", name)
	}
	if !Exists(name) {
		if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
			return fmt.Errorf("ip netns add %s: %v: %s", name, err, strings.TrimSpace(string(out)))
		}
	}
	h, err := Handle(name)
	if err != nil {
		return err
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("loopback of %s: %w", name, err)
	}
	return h.LinkSetUp(lo)
}

// Delete removes the named namespace; a missing one is fine. The
// namespace's interfaces go with it (veth peers elsewhere too).
func Delete(name string) error {
	if !Exists(name) {
		return nil
	}
	if out, err := exec.Command("ip", "netns", "delete", name).CombinedOutput(); err != nil {
		return fmt.Errorf("ip netns delete %s: %v: %s", name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// List returns the named namespaces whose names start with prefix.
func List(prefix string) ([]string, error) {
	entries, err := os.ReadDir(Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}

// Handle is a netlink handle that works inside the named namespace.
func Handle(name string) (*netlink.Handle, error) {
	ns, err := vnetns.GetFromPath(Path(name))
	if err != nil {
		return nil, fmt.Errorf("open namespace %s: %w", name, err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return nil, fmt.Errorf("netlink in %s: %w", name, err)
	}
	return h, nil
}

// Fd opens the named namespace; the caller closes it.
func Fd(name string) (vnetns.NsHandle, error) {
	ns, err := vnetns.GetFromPath(Path(name))
	if err != nil {
		return 0, fmt.Errorf("open namespace %s: %w", name, err)
	}
	return ns, nil
}

// Do runs fn on an OS thread that has entered the named namespace.
// Sockets opened in fn stay in that namespace after Do returns.
func Do(name string, fn func() error) error {
	target, err := vnetns.GetFromPath(Path(name))
	if err != nil {
		return fmt.Errorf("open namespace %s: %w", name, err)
	}
	defer target.Close()
	errCh := make(chan error, 1)
	// A fresh goroutine: if returning to the original namespace fails, its
	// thread stays locked and dies with it instead of serving others.
	go func() {
		runtime.LockOSThread()
		orig, err := vnetns.Get()
		if err != nil {
			errCh <- err
			return
		}
		defer orig.Close()
		if err := vnetns.Set(target); err != nil {
			errCh <- fmt.Errorf("enter namespace %s: %w", name, err)
			return
		}
		ferr := fn()
		if err := vnetns.Set(orig); err != nil {
			errCh <- errors.Join(ferr, fmt.Errorf("leave namespace %s: %w", name, err))
			return // the thread is not unlocked: it is discarded
		}
		runtime.UnlockOSThread()
		errCh <- ferr
	}()
	return <-errCh
}

// Listen opens a listener inside the named namespace.
func Listen(name, network, addr string) (net.Listener, error) {
	var l net.Listener
	err := Do(name, func() (err error) {
		l, err = net.Listen(network, addr)
		return err
	})
	return l, err
}

// ListenPacket opens a packet listener (UDP) inside the named namespace.
func ListenPacket(name, network, addr string) (net.PacketConn, error) {
	var pc net.PacketConn
	err := Do(name, func() (err error) {
		pc, err = net.ListenPacket(network, addr)
		return err
	})
	return pc, err
}

// DialContext connects from inside the named namespace.
func DialContext(ctx context.Context, name, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := Do(name, func() (err error) {
		var d net.Dialer
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// Sysctl sets a sysctl ("net.ipv4.ip_forward") inside the named namespace.
func Sysctl(name, key, value string) error {
	return Do(name, func() error {
		p := "/proc/sys/" + strings.ReplaceAll(key, ".", "/")
		if err := os.WriteFile(p, []byte(value), 0o644); err != nil {
			return fmt.Errorf("sysctl %s=%s in %s: %w", key, value, name, err)
		}
		return nil
	})
}
