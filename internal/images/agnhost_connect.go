package images

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"time"
)

// errSCTP is what SCTP gets from svcnet's agnhost.
var errSCTP = errors.New("SCTP is not supported by svcnet's agnhost")

// agnhostConnect is agnhost's connect: `connect [--timeout=D]
// [--protocol=tcp|udp|sctp] HOST:PORT` opens a connection (UDP: sends
// --udp-data and a newline and waits for an answer) and exits 0, or
// exits 1 with a line on stderr that starts with what went wrong, which
// tests look for:
//
//	UNKNOWN   bad arguments (and, for UDP, other failures)
//	DNS       HOST does not resolve
//	TIMEOUT   no answer within --timeout (0: the system's limit)
//	REFUSED   connection refused
//	OTHER     anything else
func agnhostConnect(_ context.Context, env *agnhostEnv, args []string) error {
	fs := agnhostFlagSet(env, "connect")
	timeout := fs.Duration("timeout", 0, "maximum time before returning an error")
	protocol := fs.String("protocol", "tcp", "tcp, udp or sctp")
	udpData := fs.String("udp-data", "hostname", "the UDP payload")
	fs.String("sctp-data", "hostname", "the SCTP payload")
	dests, err := parseAgnhostFlags(fs, args, -1)
	if err != nil {
		return err
	}
	if len(dests) != 1 {
		return fmt.Errorf("connect: accepts 1 arg(s), received %d", len(dests))
	}
	var msg string
	switch *protocol {
	case "", "tcp":
		msg = connectTCP(dests[0], *timeout)
	case "udp":
		msg = connectUDP(dests[0], *timeout, *udpData)
	case "sctp":
		msg = connectSCTP(dests[0])
	default:
		msg = "Unsupported protocol\n" + *protocol
	}
	if msg == "" {
		return nil
	}
	fmt.Fprint(env.stderr, msg)
	return agnhostExit(1)
}

// connectTCP returns connect's message for a TCP connection to dest, ""
// if it opens.
func connectTCP(dest string, timeout time.Duration) string {
	if _, _, err := net.SplitHostPort(dest); err != nil {
		return fmt.Sprintf("UNKNOWN: %v\n", err)
	}
	if _, err := net.ResolveTCPAddr("tcp", dest); err != nil {
		return fmt.Sprintf("DNS: %v\n", err)
	}
	c, err := net.DialTimeout("tcp", dest, timeout)
	if err == nil {
		c.Close()
		return ""
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		if opErr.Timeout() {
			return "TIMEOUT\n"
		}
		if errors.Is(opErr.Err, syscall.ECONNREFUSED) {
			return "REFUSED\n"
		}
	}
	return fmt.Sprintf("OTHER: %v\n", err)
}

// connectUDP returns connect's message for an exchange of datagrams with
// dest, "" if an answer comes.
func connectUDP(dest string, timeout time.Duration, data string) string {
	if _, err := net.ResolveUDPAddr("udp", dest); err != nil {
		return fmt.Sprintf("DNS: %v\n", err)
	}
	c, err := net.Dial("udp", dest)
	if err != nil {
		return fmt.Sprintf("OTHER: %v\n", err)
	}
	defer c.Close()
	if timeout > 0 {
		if err := c.SetDeadline(time.Now().Add(timeout)); err != nil {
			return fmt.Sprintf("OTHER: %v\n", err)
		}
	}
	if _, err := c.Write([]byte(data + "\n")); err != nil {
		return connectUDPFailure(err)
	}
	size, err := c.Read(make([]byte, 1024))
	if err != nil {
		return connectUDPFailure(err)
	}
	if size == 0 {
		return "OTHER: No data received from the server. Cannot guarantee the server received the request.\n"
	}
	return ""
}

func connectUDPFailure(err error) string {
	var netErr net.Error
	switch {
	case errors.As(err, &netErr) && netErr.Timeout():
		return fmt.Sprintf("TIMEOUT: %v\n", err)
	case strings.Contains(err.Error(), "connection refused"):
		return fmt.Sprintf("REFUSED: %v\n", err)
	}
	return fmt.Sprintf("UNKNOWN: %v\n", err)
}

// connectSCTP fails as a machine without SCTP does, once dest resolves.
func connectSCTP(dest string) string {
	if _, err := net.ResolveTCPAddr("tcp", dest); err != nil {
		return fmt.Sprintf("DNS: %v\n", err)
	}
	return fmt.Sprintf("OTHER: %v\n", errSCTP)
}
