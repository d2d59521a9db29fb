package portpick

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// TestLoopback: a port below the ephemeral range, free for TCP and UDP,
// and not the same twice in a row (it is chosen at random).
func TestLoopback(t *testing.T) {
	first := ephemeralStart(rangeFile)
	seen := map[int]bool{}
	for range 20 {
		port, err := Loopback()
		if err != nil {
			t.Fatal(err)
		}
		if port < lowest || port >= first {
			t.Fatalf("port %d outside [%d, %d)", port, lowest, first)
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("%s is not free over TCP: %v", addr, err)
		}
		l.Close()
		u, err := net.ListenPacket("udp", addr)
		if err != nil {
			t.Fatalf("%s is not free over UDP: %v", addr, err)
		}
		u.Close()
		seen[port] = true
	}
	if len(seen) < 15 {
		t.Errorf("20 ports, only %d distinct: %v", len(seen), seen)
	}
}

// TestFree: a port taken over TCP or over UDP is not free.
func TestFree(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if free(l.Addr().String()) {
		t.Errorf("%s is listened on over TCP, and free says it is free", l.Addr())
	}
	u, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	if free(u.LocalAddr().String()) {
		t.Errorf("%s is bound over UDP, and free says it is free", u.LocalAddr())
	}
}

func TestEphemeralStart(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, content string
		want          int
	}{
		{"the kernel's format", "40000\t60999\n", 40000},
		{"too low to leave room below", "10500\t60999\n", 32768},
		{"not a number", "x y\n", 32768},
		{"empty", "", 32768},
	} {
		file := filepath.Join(dir, tc.name)
		if err := os.WriteFile(file, []byte(tc.content), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := ephemeralStart(file); got != tc.want {
			t.Errorf("%s (%q): %d, want %d", tc.name, tc.content, got, tc.want)
		}
	}
	if got := ephemeralStart(filepath.Join(dir, "missing")); got != 32768 {
		t.Errorf("no file: %d, want 32768", got)
	}
}
