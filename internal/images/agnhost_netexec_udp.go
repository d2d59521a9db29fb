package images

import (
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
)

// serveUDP answers netexec's UDP commands on c, one datagram each,
// matched without regard to case and surrounding space:
//
//	hostname      the pod's hostname
//	echo MSG      MSG (lower-cased, as agnhost answers)
//	envvar NAME   the environment variable NAME ("" if unset)
//	clientip      the sender's host:port
//	serverport    --udp-port
//
// Anything else goes unanswered. It returns when c is closed, and
// netexec is no longer ready.
func (n *netexec) serveUDP(c net.PacketConn) error {
	defer n.ready.Store(false)
	buf := make([]byte, 2048)
	for {
		size, from, err := c.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			n.log.Printf("UDP server exited: %v", err)
			return err
		}
		reply, ok := n.udpReply(string(buf[:size]), from)
		if !ok {
			continue
		}
		if _, err := c.WriteTo([]byte(reply), from); err != nil {
			n.log.Printf("failed to answer UDP client %s: %v", from, err)
		}
	}
}

// udpReply is netexec's answer to a UDP (or SCTP) command from a client.
func (n *netexec) udpReply(msg string, from net.Addr) (string, bool) {
	raw := strings.TrimSpace(msg)
	cmd := strings.ToLower(raw)
	switch {
	case cmd == "hostname":
		name, err := os.Hostname()
		if err != nil {
			n.log.Printf("failed to get hostname: %v", err)
			return "", false
		}
		return name, true
	case strings.HasPrefix(cmd, "envvar "):
		_, name, _ := strings.Cut(raw, " ")
		return os.Getenv(strings.TrimSpace(name)), true
	case strings.HasPrefix(cmd, "echo "):
		_, text, _ := strings.Cut(cmd, " ")
		n.log.Printf("Echoing %v to UDP client %s", text, from)
		return text, true
	case cmd == "clientip":
		return from.String(), true
	case cmd == "serverport":
		return strconv.Itoa(n.udpPort), true
	case cmd != "":
		n.log.Printf("Unknown UDP command received from %s: %v", from, cmd)
	}
	return "", false
}
