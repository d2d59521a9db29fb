package server

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"time"
)

// maxQueriesPerConn bounds one connection's life; a client with more to
// ask reconnects, which keeps any one of them from holding a slot forever.
const maxQueriesPerConn = 10000

func (s *Server) serveTCP(ctx context.Context) {
	defer s.wg.Done()
	for {
		c, err := s.tcp.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || ctx.Err() != nil {
				return
			}
			s.log.Debug("dns tcp accept", "err", err)
			time.Sleep(5 * time.Millisecond) // e.g. out of file descriptors
			continue
		}
		select {
		case s.tcpConns <- struct{}{}:
		default:
			c.Close() // over the limit: the client retries elsewhere or later
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() { <-s.tcpConns }()
			s.serveConn(ctx, c)
		}()
	}
}

// serveConn answers length-prefixed queries in order (RFC 7766 allows
// pipelining; answering in order is allowed too).
func (s *Server) serveConn(ctx context.Context, c net.Conn) {
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	client := addrOf(c.RemoteAddr())
	var hdr [2]byte
	for range maxQueriesPerConn {
		if err := c.SetReadDeadline(time.Now().Add(s.opts.TCPIdleTimeout)); err != nil {
			return
		}
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint16(hdr[:])
		if n == 0 {
			return
		}
		msg := make([]byte, n)
		if _, err := io.ReadFull(c, msg); err != nil {
			return
		}
		resp := s.handle(ctx, msg, client, true)
		if resp == nil {
			continue
		}
		out := make([]byte, 2+len(resp))
		binary.BigEndian.PutUint16(out, uint16(len(resp)))
		copy(out[2:], resp)
		if err := c.SetWriteDeadline(time.Now().Add(s.opts.TCPIdleTimeout)); err != nil {
			return
		}
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}
