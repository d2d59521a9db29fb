package upstream

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"syscall"
)

// Attempt is one try of a request on one connection to a pod that failed
// before the pod answered anything.
type Attempt struct {
	Method string
	// Reused: the connection had served requests before, so the pod may
	// have closed it while it was idle.
	Reused bool
	// Body: the request has a body, which may have been sent in part and
	// is never sent again.
	Body bool
}

// Next is what follows a failed attempt.
type Next int

const (
	// Fail answers the client with GatewayError.
	Fail Next = iota
	// Again sends the request to the same endpoint on a new connection.
	Again
	// Another sends the request to the next endpoint not tried.
	Another
)

// After decides what follows an attempt that failed with err, as nginx's
// proxy_next_upstream "error" does:
//   - a failure to connect sent nothing: the next endpoint, any method;
//   - a request with a body, or one not idempotent (RFC 9110), may have
//     been acted on: the client gets the failure;
//   - a timeout is the pod's answer in time: 504;
//   - a kept-alive connection the pod had closed: the same endpoint on a
//     new connection;
//   - a connection closed or reset before any byte of an answer (a pod
//     that was stopping when it accepted): the next endpoint.
//
// When every endpoint was tried, the client gets the last failure.
func After(err error, a Attempt) Next {
	switch {
	case DialFailed(err):
		return Another
	case a.Body || !Idempotent(a.Method) || IsTimeout(err) || errors.As(err, new(badAnswer)):
		return Fail
	case a.Reused:
		return Again
	case AnsweredNothing(err):
		return Another
	}
	return Fail
}

// Idempotent reports the methods RFC 9110 calls idempotent.
func Idempotent(method string) bool {
	switch method {
	case "GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE":
		return true
	}
	return false
}

// ErrStale is a reused connection that the pod had closed: nothing was
// answered.
var ErrStale = errors.New("the pod closed the kept-alive connection")

// AnsweredNothing reports whether err is a pod's connection closed or
// reset before any byte of an answer.
func AnsweredNothing(err error) bool {
	return errors.Is(err, ErrStale) || errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// DialError marks a failure to connect.
type DialError struct{ Err error }

func (e DialError) Error() string { return e.Err.Error() }
func (e DialError) Unwrap() error { return e.Err }

// DialFailed reports whether err is a failure to connect.
func DialFailed(err error) bool {
	var op *net.OpError
	return errors.As(err, new(DialError)) || (errors.As(err, &op) && op.Op == "dial")
}

// badAnswer is a pod's answer that could not be read after its first
// byte: never sent again.
type badAnswer struct{ error }

func (e badAnswer) Unwrap() error { return e.error }

// IsTimeout reports whether err is a deadline that passed.
func IsTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) ||
		(errors.As(err, &ne) && ne.Timeout()) || errors.Is(err, syscall.ETIMEDOUT)
}

// GatewayError is the answer to a request no pod answered, whichever
// engine served it: 504 for a timeout, 502 for anything else (a refused
// or reset connection, a pod that answered nothing or garbage).
func GatewayError(err error) (int, string) {
	if IsTimeout(err) {
		return http.StatusGatewayTimeout, "504 gateway timeout"
	}
	return http.StatusBadGateway, "502 bad gateway"
}
