package server

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/freeport"
)

// BenchmarkFallback: requests through net/http's server and reverse
// proxy, the ingress's fallback, as Serve runs it: plain (a POST with a
// body, which the engine leaves to it) and over TLS, from kept-alive
// client connections to a pod that answers at once, all on loopback; for
// a small answer and for large ones, whose copy through the proxy's
// buffers is what the bytes per second measure.
func BenchmarkFallback(b *testing.B) {
	for _, size := range []int{5, 64 << 10, 1 << 20} {
		pod := keepAlivePod(b, size)
		in := serveIngressTo(b, time.Minute, pod)
		for _, p := range []struct {
			name    string
			tls     bool
			request string
		}{
			{"plain", false, "POST /big HTTP/1.1\r\nHost: app.example\r\nContent-Length: 1\r\n\r\nx"},
			{"TLS", true, "GET /big HTTP/1.1\r\nHost: app.example\r\n\r\n"},
		} {
			b.Run(fmt.Sprintf("%s/answer=%d", p.name, size), func(b *testing.B) {
				const conns = 16
				var clients []net.Conn
				for range conns {
					addr := in.plain
					if p.tls {
						addr = in.https
					}
					c, err := net.Dial("tcp", addr)
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { c.Close() })
					if p.tls {
						tc := tls.Client(c, &tls.Config{ServerName: "app.example", InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
						if err := tc.Handshake(); err != nil {
							b.Fatal(err)
						}
						c = tc
					}
					clients = append(clients, c)
				}
				b.SetBytes(int64(size))
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
							if _, err := io.WriteString(c, p.request); err != nil {
								errs <- err
								return
							}
							resp, err := http.ReadResponse(br, nil)
							if err != nil {
								errs <- err
								return
							}
							got, err := io.Copy(io.Discard, resp.Body)
							if err == nil && (resp.StatusCode != http.StatusOK || got != int64(size)) {
								err = fmt.Errorf("%s, %d bytes", resp.Status, got)
							}
							if err != nil {
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
}

// keepAlivePod answers every request on a connection with a body of its
// size, keeping the connection.
func keepAlivePod(t testing.TB, size int) string {
	answer := fmt.Appendf(nil, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", size)
	for i := range size {
		answer = append(answer, byte('a'+i%26))
	}
	return freeport.Serve(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			if _, err := io.Copy(io.Discard, req.Body); err != nil {
				return
			}
			if _, err := c.Write(answer); err != nil {
				return
			}
		}
	})
}
