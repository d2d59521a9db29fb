package upstream

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
)

func TestAfter(t *testing.T) {
	refused := &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}
	garbage := badAnswer{errors.New("malformed HTTP response")}
	tests := []struct {
		name string
		err  error
		a    Attempt
		want Next
	}{
		{"refused", refused, Attempt{Method: "POST", Body: true}, Another},
		{"dial error", DialError{syscall.EHOSTUNREACH}, Attempt{Method: "GET"}, Another},
		{"connect timeout", DialError{os.ErrDeadlineExceeded}, Attempt{Method: "GET"}, Another},
		{"stale kept-alive connection", ErrStale, Attempt{Method: "GET", Reused: true}, Again},
		{"reset kept-alive connection", syscall.ECONNRESET, Attempt{Method: "DELETE", Reused: true}, Again},
		{"write on a closed kept-alive connection", syscall.EPIPE, Attempt{Method: "GET", Reused: true}, Again},
		{"closed before answering", io.EOF, Attempt{Method: "GET"}, Another},
		{"reset before answering", fmt.Errorf("read: %w", syscall.ECONNRESET), Attempt{Method: "PUT"}, Another},
		{"not idempotent", io.EOF, Attempt{Method: "POST"}, Fail},
		{"not idempotent, kept-alive", ErrStale, Attempt{Method: "PATCH", Reused: true}, Fail},
		{"a body", io.EOF, Attempt{Method: "PUT", Body: true}, Fail},
		{"a body, kept-alive", ErrStale, Attempt{Method: "PUT", Reused: true, Body: true}, Fail},
		{"read timeout", os.ErrDeadlineExceeded, Attempt{Method: "GET", Reused: true}, Fail},
		{"garbage", garbage, Attempt{Method: "GET", Reused: true}, Fail},
		{"other", errors.New("something"), Attempt{Method: "GET"}, Fail},
	}
	for _, tt := range tests {
		if got := After(tt.err, tt.a); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestGatewayError(t *testing.T) {
	tests := []struct {
		err  error
		want int
	}{
		{os.ErrDeadlineExceeded, 504},
		{DialError{os.ErrDeadlineExceeded}, 504},
		{syscall.ETIMEDOUT, 504},
		{syscall.ECONNREFUSED, 502},
		{io.EOF, 502},
		{badAnswer{errors.New("x")}, 502},
	}
	for _, tt := range tests {
		if got, _ := GatewayError(tt.err); got != tt.want {
			t.Errorf("%v: %d, want %d", tt.err, got, tt.want)
		}
	}
}
