// Package portpick chooses loopback ports for servers that bind them
// later: the embedded etcd member, and servers that tests start.
package portpick

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// Loopback is a port that nothing listens on at 127.0.0.1, over TCP or
// UDP. It is chosen at random below the system's ephemeral range
// (net.ipv4.ip_local_port_range), which the kernel never hands to a
// connection's local end: a port from that range (what listening on
// port 0 gives) can be taken by any outgoing connection of the machine
// before the server binds it ("address already in use"). The race that
// remains is another process choosing the same port in between, 1 in
// thousands.
func Loopback() (int, error) {
	first := ephemeralStart(rangeFile)
	for range tries {
		port := lowest + rand.IntN(first-lowest)
		if free(net.JoinHostPort("127.0.0.1", strconv.Itoa(port))) {
			return port, nil
		}
	}
	return 0, fmt.Errorf("no free loopback port in [%d, %d) after %d tries", lowest, first, tries)
}

const (
	// lowest is the lowest port Loopback gives, above the well-known and
	// most registered services' ports.
	lowest = 10000
	tries  = 200
	// rangeFile holds the ephemeral range: its first and last port.
	rangeFile = "/proc/sys/net/ipv4/ip_local_port_range"
)

// ephemeralStart is the first port of the ephemeral range in file, or
// 32768 (Linux's default) where file cannot be read or its first port
// leaves fewer than 1000 ports above lowest.
func ephemeralStart(file string) int {
	data, err := os.ReadFile(file)
	if err != nil {
		return 32768
	}
	if f := strings.Fields(string(data)); len(f) > 0 {
		if n, err := strconv.Atoi(f[0]); err == nil && n > lowest+1000 {
			return n
		}
	}
	return 32768
}

// free reports whether addr can be bound over both TCP and UDP.
func free(addr string) bool {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	defer l.Close()
	u, err := net.ListenPacket("udp", addr)
	if err != nil {
		return false
	}
	u.Close()
	return true
}
