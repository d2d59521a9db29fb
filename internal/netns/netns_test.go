package netns

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
)

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root; CI runs as root")
	}
}

func TestNamespaceLifecycle(t *testing.T) {
	requireRoot(t)
	name := fmt.Sprintf("svcnet-test-ns-%d", rand.IntN(1e9))
	t.Cleanup(func() { _ = Delete(name) })
	if err := Create(name); err != nil {
		t.Fatal(err)
	}
	if err := Create(name); err != nil {
		t.Fatalf("create twice: %v", err)
	}
	names, err := List("svcnet-test-ns-")
	if err != nil || !strings.Contains(strings.Join(names, ","), name) {
		t.Fatalf("list: %v %v", names, err)
	}
	// A listener in the namespace is on its loopback, not the host's.
	l, err := Listen(name, "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		if c, err := l.Accept(); err == nil {
			c.Write([]byte("hello"))
			c.Close()
		}
	}()
	c, err := DialContext(t.Context(), name, "tcp", l.Addr().String())
	if err != nil {
		t.Fatalf("dial inside: %v", err)
	}
	buf := make([]byte, 5)
	if _, err := c.Read(buf); err != nil || string(buf) != "hello" {
		t.Fatalf("read %q %v", buf, err)
	}
	c.Close()
	hostBefore, _ := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	if err := Sysctl(name, "net.ipv4.ip_forward", "1"); err != nil {
		t.Fatal(err)
	}
	var got []byte
	if err := Do(name, func() (err error) { got, err = os.ReadFile("/proc/sys/net/ipv4/ip_forward"); return }); err != nil || strings.TrimSpace(string(got)) != "1" {
		t.Fatalf("sysctl inside: %q %v", got, err)
	}
	if host, _ := os.ReadFile("/proc/sys/net/ipv4/ip_forward"); string(host) != string(hostBefore) {
		t.Fatalf("host ip_forward changed from %q to %q", hostBefore, host)
	}
	if err := Create("not-ours"); err == nil {
		t.Fatal("created a namespace without the svcnet- prefix")
	}
	if err := Delete(name); err != nil || Exists(name) {
		t.Fatalf("delete: %v", err)
	}
}
