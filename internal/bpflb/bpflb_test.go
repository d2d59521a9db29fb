package bpflb

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
	"github.com/svcnet/svcnet/internal/sockdiag"
)

// clientEnv makes the test binary a client: it connects (or sends) to
// the address the environment names, as many times as asked, and prints
// one JSON line per attempt. The test starts it in a network namespace
// and a cgroup of its own.
const clientEnv = "SVCNET_TEST_LB_CLIENT"

// attempt is what the client saw.
type attempt struct {
	Backend string // what the server answered: its own address
	Peer    string // the peer's name (TCP, connected UDP) or the reply's source
	Err     string
	Errno   int
}

func init() {
	spec := os.Getenv(clientEnv)
	if spec == "" {
		return
	}
	// network addr count
	var network, addr string
	var n int
	if _, err := fmt.Sscan(spec, &network, &addr, &n); err != nil {
		fmt.Println("bad spec", err)
		os.Exit(2)
	}
	enc := json.NewEncoder(os.Stdout)
	if network == "udp-sticky" {
		sticky(enc, addr)
		os.Exit(0)
	}
	for range n {
		enc.Encode(try(network, addr))
	}
	os.Exit(0)
}

// sticky is a UDP client that keeps its connected socket, as resolvers
// do: it asks once, waits for a line on stdin, asks again on the same
// socket and, if that fails, on a new one. It reports each answer.
func sticky(enc *json.Encoder, addr string) {
	ask := func(c net.Conn) attempt {
		var a attempt
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		buf := make([]byte, 128)
		if _, err := c.Write([]byte("hi\n")); err != nil {
			a.Err = err.Error()
			return a
		}
		n, err := c.Read(buf)
		if err != nil {
			a.Err = err.Error()
			return a
		}
		a.Backend, a.Peer = strings.TrimSpace(string(buf[:n])), c.RemoteAddr().String()
		return a
	}
	c, err := net.Dial("udp", addr)
	if err != nil {
		enc.Encode(attempt{Err: err.Error()})
		return
	}
	enc.Encode(ask(c))
	bufio.NewReader(os.Stdin).ReadString('\n')
	a := ask(c)
	enc.Encode(a)
	if a.Err != "" {
		c.Close()
		if c, err = net.Dial("udp", addr); err != nil {
			enc.Encode(attempt{Err: err.Error()})
			return
		}
		enc.Encode(ask(c))
	}
}

func try(network, addr string) attempt {
	var a attempt
	fail := func(err error) attempt {
		a.Err = err.Error()
		var errno syscall.Errno
		if errors.As(err, &errno) {
			a.Errno = int(errno)
		}
		return a
	}
	buf := make([]byte, 128)
	switch network {
	case "tcp", "udp-connected":
		nw := "tcp"
		if network != "tcp" {
			nw = "udp"
		}
		c, err := net.DialTimeout(nw, addr, 2*time.Second)
		if err != nil {
			return fail(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Write([]byte("hi\n")); err != nil {
			return fail(err)
		}
		n, err := c.Read(buf)
		if err != nil {
			return fail(err)
		}
		a.Backend, a.Peer = strings.TrimSpace(string(buf[:n])), c.RemoteAddr().String()
	case "udp":
		c, err := net.ListenPacket("udp", ":0")
		if err != nil {
			return fail(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		to, err := net.ResolveUDPAddr("udp", addr)
		if err != nil {
			return fail(err)
		}
		if _, err := c.WriteTo([]byte("hi\n"), to); err != nil {
			return fail(err)
		}
		n, from, err := c.ReadFrom(buf)
		if err != nil {
			return fail(err)
		}
		a.Backend, a.Peer = strings.TrimSpace(string(buf[:n])), from.String()
	}
	return a
}

// lab is a network namespace with backends on its loopback, a cgroup
// below svcnet's own test group, and the LB attached to it.
type lab struct {
	t      *testing.T
	ns     string
	cgroup string
	lb     *LB
}

func newLab(t *testing.T) *lab {
	t.Helper()
	ns := netnstest.New(t, "lb")
	mount, err := Cgroup2Mount()
	if err != nil {
		t.Fatal(err)
	}
	cg := filepath.Join(mount, fmt.Sprintf("svcnet-test-lb-%d", rand.IntN(1e9)))
	if err := os.Mkdir(cg, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.Remove(cg); err != nil {
			t.Errorf("remove cgroup: %v", err)
		}
	})
	lb, err := Load(Sizes{Services: 64, IDs: 64, Backends: 256, Sockets: 1024, Affinities: 64, Flows: 1024, Ranges: 64}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lb.Close() })
	if err := lb.Attach(cg); err != nil {
		t.Fatal(err)
	}
	h, err := netns.Handle(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"fd00::1/128", "fd00::2/128"} {
		if err := h.AddrAdd(lo, &netlink.Addr{IPNet: mustCIDR(a)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.LinkSetUp(lo); err != nil {
		t.Fatal(err)
	}
	return &lab{t: t, ns: ns, cgroup: cg, lb: lb}
}

func mustCIDR(s string) *net.IPNet {
	ip, n, err := net.ParseCIDR(s)
	if err != nil {
		panic(err)
	}
	n.IP = ip
	return n
}

// serve answers every connection and datagram at addr with addr itself.
func (l *lab) serve(addr string) {
	l.t.Helper()
	ln, err := netns.Listen(l.ns, "tcp", addr)
	if err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				bufio.NewReader(c).ReadString('\n')
				c.Write([]byte(addr + "\n"))
			}()
		}
	}()
	pc, err := netns.ListenPacket(l.ns, "udp", addr)
	if err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 64)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo([]byte(addr+"\n"), from)
		}
	}()
}

// run runs the client n times against addr, in the lab's namespace, in
// the lab's cgroup (or, with inGroup false, outside it).
func (l *lab) run(network, addr string, n int, inGroup bool) []attempt {
	l.t.Helper()
	self, err := os.Executable()
	if err != nil {
		l.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", l.ns, self)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s %d", clientEnv, network, addr, n))
	if inGroup {
		fd, err := unix.Open(l.cgroup, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			l.t.Fatal(err)
		}
		defer unix.Close(fd)
		cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	}
	out, err := cmd.Output()
	if err != nil {
		l.t.Fatalf("client: %v\n%s", err, out)
	}
	var res []attempt
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var a attempt
		if err := dec.Decode(&a); err != nil {
			l.t.Fatalf("client output %q: %v", out, err)
		}
		res = append(res, a)
	}
	if len(res) != n {
		l.t.Fatalf("client made %d attempts, want %d: %s", len(res), n, out)
	}
	return res
}

func ap(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

// TestTranslate runs the programs in the kernel: clients in the cgroup
// reach a service address's backends, see the service's address as
// their peer, and are refused at once when it has none.
func TestTranslate(t *testing.T) {
	l := newLab(t)
	for _, b := range []string{"127.0.0.1:8080", "127.0.0.2:8080", "[fd00::1]:8080", "[fd00::2]:8080"} {
		l.serve(b)
	}
	svc := func(addr string, proto uint8) ServiceKey {
		a := ap(addr)
		return ServiceKey{Addr: a.Addr(), Port: a.Port(), Proto: proto}
	}
	type entry struct {
		key      ServiceKey
		val      Service
		backends []netip.AddrPort
	}
	two4 := []netip.AddrPort{ap("127.0.0.1:8080"), ap("127.0.0.2:8080")}
	two6 := []netip.AddrPort{ap("[fd00::1]:8080"), ap("[fd00::2]:8080")}
	entries := []entry{
		{svc("10.96.0.10:80", unix.IPPROTO_TCP), Service{ID: 1, Count: 2}, two4},
		{svc("10.96.0.10:53", unix.IPPROTO_UDP), Service{ID: 2, Count: 2, Gen: 1}, two4},
		{svc("[fd00:96::10]:80", unix.IPPROTO_TCP), Service{ID: 3, Count: 2}, two6},
		{svc("[fd00:96::10]:53", unix.IPPROTO_UDP), Service{ID: 4, Count: 2}, two6},
		{svc("10.96.0.11:80", unix.IPPROTO_TCP), Service{ID: 5, Verdict: Reject}, nil},
		{svc("10.96.0.12:80", unix.IPPROTO_TCP), Service{ID: 6, Verdict: Drop}, nil},
		{svc("10.96.0.13:80", unix.IPPROTO_TCP), Service{ID: 7, Count: 2, Affinity: 60}, two4},
	}
	for _, e := range entries {
		if err := l.lb.PutBackends([]BackendSet{{e.val.ID, e.val.Gen, e.backends}}); err != nil {
			t.Fatal(err)
		}
		if err := l.lb.PutServices([]ServiceKey{e.key}, []Service{e.val}); err != nil {
			t.Fatal(err)
		}
	}

	const n = 24
	spread := []struct {
		name, network, addr string
		backends            []netip.AddrPort
		sticky              bool
	}{
		{"tcp4", "tcp", "10.96.0.10:80", two4, false},
		{"udp4 unconnected", "udp", "10.96.0.10:53", two4, false},
		{"udp4 connected", "udp-connected", "10.96.0.10:53", two4, false},
		{"tcp6", "tcp", "[fd00:96::10]:80", two6, false},
		{"udp6 unconnected", "udp", "[fd00:96::10]:53", two6, false},
		{"affinity", "tcp", "10.96.0.13:80", two4, true},
	}
	for _, c := range spread {
		t.Run(c.name, func(t *testing.T) {
			seen := map[string]int{}
			for _, a := range l.run(c.network, c.addr, n, true) {
				if a.Err != "" {
					t.Fatalf("attempt failed: %s", a.Err)
				}
				if a.Peer != c.addr {
					t.Errorf("peer %s, want the service's address %s", a.Peer, c.addr)
				}
				seen[a.Backend]++
			}
			for b := range seen {
				if !contains(c.backends, b) {
					t.Errorf("reached %s, not a backend", b)
				}
			}
			want := len(c.backends)
			if c.sticky {
				want = 1
			}
			// 24 random picks among two miss one with probability 2^-23.
			if len(seen) != want {
				t.Errorf("reached %v, want %d distinct backends", seen, want)
			}
		})
	}

	refused := []struct {
		name, addr string
		errno      syscall.Errno
	}{
		{"no endpoints: refused", "10.96.0.11:80", syscall.ECONNREFUSED},
		{"none local: not permitted", "10.96.0.12:80", syscall.EPERM},
	}
	for _, c := range refused {
		t.Run(c.name, func(t *testing.T) {
			for _, a := range l.run("tcp", c.addr, 2, true) {
				if syscall.Errno(a.Errno) != c.errno {
					t.Errorf("got %q (errno %d), want %v", a.Err, a.Errno, c.errno)
				}
			}
		})
	}

	t.Run("outside the cgroup", func(t *testing.T) {
		// No route to the service range in the namespace: untranslated,
		// the connect fails there.
		for _, a := range l.run("tcp", "10.96.0.10:80", 1, false) {
			if a.Err == "" {
				t.Errorf("a process outside the cgroup reached %s through the service address", a.Backend)
			}
		}
	})

	t.Run("stats", func(t *testing.T) {
		s, err := l.lb.Stats(1)
		if err != nil {
			t.Fatal(err)
		}
		if s.Translated != n {
			t.Errorf("service 1 translated %d connects, want %d", s.Translated, n)
		}
		if s, _ := l.lb.Stats(5); s.Refused != 2 {
			t.Errorf("service 5 refused %d, want 2", s.Refused)
		}
	})

	t.Run("dump", func(t *testing.T) {
		d, err := l.lb.Dump()
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if got := d.Services[e.key]; got != e.val {
				t.Errorf("%s: dumped %+v, wrote %+v", e.key, got, e.val)
			}
			for i, b := range e.backends {
				if got := d.Backends[BackendKey{ID: e.val.ID, Slot: uint16(i), Gen: e.val.Gen}]; got != b {
					t.Errorf("%s slot %d: dumped %s, wrote %s", e.key, i, got, b)
				}
			}
		}
	})

	t.Run("the live maps, found through the group", func(t *testing.T) {
		live, err := OpenAttached(l.cgroup)
		if err != nil {
			t.Fatal(err)
		}
		defer live.Close()
		got, err := live.Dump()
		if err != nil {
			t.Fatal(err)
		}
		want, _ := l.lb.Dump()
		if len(got.Services) != len(want.Services) || len(got.Backends) != len(want.Backends) {
			t.Errorf("live: %d entries, %d slots; the LB's: %d, %d", len(got.Services), len(got.Backends), len(want.Services), len(want.Backends))
		}
		for k, v := range want.Services {
			if got.Services[k] != v {
				t.Errorf("%s: live %+v, the LB's %+v", k, got.Services[k], v)
			}
		}
		if _, err := OpenAttached(filepath.Dir(l.cgroup)); err == nil {
			t.Error("found programs on a group without them")
		}
	})

	t.Run("attached", func(t *testing.T) {
		ok, err := l.lb.Attached(l.cgroup)
		if err != nil || !ok {
			t.Errorf("Attached = %v, %v", ok, err)
		}
	})
}

func contains(bs []netip.AddrPort, s string) bool {
	for _, b := range bs {
		if b.String() == s {
			return true
		}
	}
	return false
}

func TestCheckCgroup(t *testing.T) {
	mount, err := Cgroup2Mount()
	if err != nil {
		t.Skip(err)
	}
	for _, path := range []string{mount, "/tmp", filepath.Join(mount, "nonexistent-svcnet")} {
		if err := CheckCgroup(path); err == nil {
			t.Errorf("CheckCgroup(%s) accepted it", path)
		}
	}
}

// TestForgetUDPMovesClients: a UDP client whose connected socket the
// programs gave an endpoint that goes away is moved to a live one: its
// socket is destroyed (found by its cookie in the namespaces of the
// group's processes), its next question fails, and its new socket
// reaches the other endpoint.
func TestForgetUDPMovesClients(t *testing.T) {
	l := newLab(t)
	backends := []netip.AddrPort{ap("127.0.0.1:8080"), ap("127.0.0.2:8080")}
	for _, b := range backends {
		l.serve(b.String())
	}
	key := ServiceKey{Addr: netip.MustParseAddr("10.96.0.53"), Port: 53, Proto: unix.IPPROTO_UDP}
	if err := l.lb.PutBackends([]BackendSet{{ID: 1, Backends: backends}}); err != nil {
		t.Fatal(err)
	}
	if err := l.lb.PutServices([]ServiceKey{key}, []Service{{ID: 1, Count: 2}}); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(l.cgroup, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", l.ns, self)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=udp-sticky %s 1", clientEnv, "10.96.0.53:53"))
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	dec := json.NewDecoder(stdout)
	var first attempt
	if err := dec.Decode(&first); err != nil || first.Err != "" {
		t.Fatalf("first answer: %+v %v", first, err)
	}
	// The endpoint it got goes: the set switches to the other one's
	// generation, and its clients are forgotten and destroyed.
	gone, _ := netip.ParseAddrPort(first.Backend)
	live := backends[0]
	if live == gone {
		live = backends[1]
	}
	if err := l.lb.PutBackends([]BackendSet{{ID: 1, Gen: 1, Backends: []netip.AddrPort{live}}}); err != nil {
		t.Fatal(err)
	}
	if err := l.lb.PutServices([]ServiceKey{key}, []Service{{ID: 1, Count: 1, Gen: 1}}); err != nil {
		t.Fatal(err)
	}
	cookies, err := l.lb.ForgetUDP([]netip.AddrPort{gone})
	if err != nil || len(cookies) == 0 {
		t.Fatalf("cookies of the clients of %s: %v, %v", gone, cookies, err)
	}
	n, err := sockdiag.DestroyInCgroup(l.cgroup, func(s sockdiag.Socket) bool { return cookies[s.Cookie] })
	if err != nil || n != 1 {
		t.Fatalf("destroyed %d sockets (%v), want the client's one", n, err)
	}
	stdin.Write([]byte("go\n"))
	var second, third attempt
	// A destroyed UDP socket is disconnected, its error ECONNABORTED: a
	// send fails with EDESTADDRREQ, a receive with ECONNABORTED.
	if err := dec.Decode(&second); err != nil || !(strings.Contains(second.Err, "connection abort") || strings.Contains(second.Err, "destination address required")) {
		t.Fatalf("the destroyed socket's next question: %+v %v, want it refused", second, err)
	}
	if err := dec.Decode(&third); err != nil || third.Backend != live.String() || third.Peer != "10.96.0.53:53" {
		t.Fatalf("on a new socket: %+v %v, want an answer from %s through the service's address", third, err, live)
	}
}

// TestCheck: this kernel runs the programs (docs/architecture.md); a
// kernel without one of the features is refused with the feature's name.
func TestCheck(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("loading BPF programs takes root; CI runs as root")
	}
	if err := Check(); err != nil {
		t.Fatal(err)
	}
	have := func() error { return nil }
	cases := []struct {
		name  string
		probe []probe
		want  string
	}{
		{"all there", []probe{{"a", have}, {"b", have}}, ""},
		{"one missing", []probe{{"a", have}, {"bpf_set_retval", func() error { return fmt.Errorf("x: %w", ebpf.ErrNotSupported) }}},
			"this kernel lacks bpf_set_retval"},
		{"a probe that fails otherwise", []probe{{"tc programs", func() error { return errors.New("permission denied") }}},
			"probe for tc programs: permission denied"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := lacking(c.probe)
			if (c.want == "") != (err == nil) || (err != nil && err.Error() != c.want) {
				t.Errorf("got %v, want %q", err, c.want)
			}
		})
	}
}
