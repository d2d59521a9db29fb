package proxy

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"sync"
	"testing"
)

// BenchmarkFront: requests through each way of serving plain HTTP/1.1,
// from 50 kept-alive client connections to a pod that answers at once,
// all on loopback: the time and the allocations per request, the
// client's and the pod's (a few, of bufio) included.
func BenchmarkFront(b *testing.B) {
	const answer = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nbench"
	pod := rawPod(b, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			// Heads only: read to the empty line.
			for {
				line, err := br.ReadSlice('\n')
				if err != nil {
					return
				}
				if len(line) <= 2 {
					break
				}
			}
			if _, err := io.WriteString(c, answer); err != nil {
				return
			}
		}
	})
	for _, f := range fronts {
		b.Run(f.name, func(b *testing.B) {
			p := New(Options{})
			b.Cleanup(p.Close)
			p.Set(routes(b, map[string][]string{"bench": {pod}}, nil))
			fr := f.serve(b, p, 8080)
			const conns = 50
			req := []byte("GET /bench HTTP/1.1\r\nHost: app.example\r\nUser-Agent: bench\r\n\r\n")
			var clients []net.Conn
			for range conns {
				c, err := net.Dial("tcp", fr.addr)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { c.Close() })
				clients = append(clients, c)
			}
			b.ReportAllocs()
			b.ResetTimer()
			var wg sync.WaitGroup
			errs := make(chan error, conns)
			for i, c := range clients {
				n := b.N / conns
				if i < b.N%conns {
					n++
				}
				wg.Go(func() {
					br := bufio.NewReader(c)
					for range n {
						if _, err := c.Write(req); err != nil {
							errs <- err
							return
						}
						// The answer's head, then its 5 bytes.
						for {
							line, err := br.ReadSlice('\n')
							if err != nil {
								errs <- err
								return
							}
							if len(line) <= 2 {
								break
							}
						}
						var body [5]byte
						if _, err := io.ReadFull(br, body[:]); err != nil || !bytes.Equal(body[:], []byte("bench")) {
							errs <- err
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
		})
	}
}
