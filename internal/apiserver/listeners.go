package apiserver

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"

	"github.com/svcnet/svcnet/internal/netns"
)

// NetnsListen is an extra address to serve on inside a named network
// namespace ("svcnet-demo-net/172.18.0.1:6443"), so that the nodes and
// pods of a local cluster reach the API server while the host's network
// stays untouched.
type NetnsListen struct {
	Netns, Addr string
}

// ParseNetnsListen reads NETNS/HOST:PORT.
func ParseNetnsListen(s string) (NetnsListen, error) {
	ns, addr, ok := strings.Cut(s, "/")
	if !ok || ns == "" || addr == "" {
		return NetnsListen{}, fmt.Errorf("%q: want NETNS/HOST:PORT", s)
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return NetnsListen{}, fmt.Errorf("%q: %w", s, err)
	}
	return NetnsListen{Netns: ns, Addr: addr}, nil
}

// multiListener accepts from several listeners as one; its address is the
// first one's.
type multiListener struct {
	ls    []net.Listener
	conns chan net.Conn
	errs  chan error
	once  sync.Once
	done  chan struct{}
}

func newMultiListener(ls ...net.Listener) *multiListener {
	m := &multiListener{ls: ls, conns: make(chan net.Conn), errs: make(chan error, len(ls)), done: make(chan struct{})}
	for _, l := range ls {
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					var ne net.Error
					if errors.As(err, &ne) && ne.Timeout() {
						continue
					}
					m.errs <- err
					return
				}
				select {
				case m.conns <- c:
				case <-m.done:
					c.Close()
					return
				}
			}
		}()
	}
	return m
}

func (m *multiListener) Accept() (net.Conn, error) {
	select {
	case c := <-m.conns:
		return c, nil
	case err := <-m.errs:
		return nil, err
	case <-m.done:
		return nil, net.ErrClosed
	}
}

func (m *multiListener) Close() error {
	var errs []error
	m.once.Do(func() {
		close(m.done)
		for _, l := range m.ls {
			errs = append(errs, l.Close())
		}
	})
	return errors.Join(errs...)
}

func (m *multiListener) Addr() net.Addr { return m.ls[0].Addr() }

// listenExtra opens the extra listeners.
func listenExtra(extra []NetnsListen) ([]net.Listener, error) {
	var out []net.Listener
	for _, e := range extra {
		l, err := netns.Listen(e.Netns, "tcp", e.Addr)
		if err != nil {
			for _, o := range out {
				o.Close()
			}
			return nil, fmt.Errorf("serve in namespace %s on %s: %w", e.Netns, e.Addr, err)
		}
		out = append(out, l)
	}
	return out, nil
}
