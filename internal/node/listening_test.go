package node

import (
	"context"
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func TestTCPPorts(t *testing.T) {
	c := &corev1.Container{Ports: []corev1.ContainerPort{{ContainerPort: 80}, {ContainerPort: 53, Protocol: corev1.ProtocolUDP}, {ContainerPort: 443, Protocol: corev1.ProtocolTCP}}}
	if got := tcpPorts(c); len(got) != 2 || got[0] != 80 || got[1] != 443 {
		t.Errorf("tcpPorts %v", got)
	}
}

// TestWaitListening: ready once the declared port opens, not before; a
// port that never opens gives up at the bound.
func TestWaitListening(t *testing.T) {
	free := func() int32 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return int32(l.Addr().(*net.TCPAddr).Port)
	}
	lo := netip.MustParseAddr("127.0.0.1")
	cases := []struct {
		name     string
		openAt   time.Duration // -1: never
		wait     time.Duration
		earliest time.Duration
	}{
		{"opens later", 300 * time.Millisecond, 10 * time.Second, 300 * time.Millisecond},
		{"never opens", -1, 400 * time.Millisecond, 400 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			port := free()
			if tc.openAt >= 0 {
				time.AfterFunc(tc.openAt, func() {
					l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", itoa(port)))
					if err != nil {
						t.Error(err)
						return
					}
					t.Cleanup(func() { l.Close() })
				})
			}
			out := make(chan probeResult, 1)
			start := time.Now()
			go waitListening(context.Background(), "c", []int32{port}, lo, 3, tc.wait, out)
			select {
			case r := <-out:
				if took := time.Since(start); took < tc.earliest {
					t.Errorf("ready after %s, before %s", took, tc.earliest)
				}
				if !r.ok || r.kind != listening || r.gen != 3 || r.container != "c" {
					t.Errorf("result %+v", r)
				}
			case <-time.After(tc.wait + 5*time.Second):
				t.Fatal("no result")
			}
		})
	}
}

func itoa(p int32) string { return strconv.Itoa(int(p)) }
