package prober

import (
	"context"
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/node/podstate"
)

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
			out := make(chan Result, 1)
			start := time.Now()
			go WaitListening(context.Background(), "c", []int32{port}, lo, 3, tc.wait, out)
			select {
			case r := <-out:
				if took := time.Since(start); took < tc.earliest {
					t.Errorf("ready after %s, before %s", took, tc.earliest)
				}
				if !r.OK || r.Kind != podstate.Listening || r.Gen != 3 || r.Container != "c" {
					t.Errorf("result %+v", r)
				}
			case <-time.After(tc.wait + 5*time.Second):
				t.Fatal("no result")
			}
		})
	}
}

func itoa(p int32) string { return strconv.Itoa(int(p)) }
