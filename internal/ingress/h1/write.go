package h1

import (
	"net/http"
	"strconv"
)

// Forwarded is what a proxy tells the pod about the client, in the
// fields it writes itself (as ingress-nginx does by default; the client's
// own X-Forwarded-For is not trusted).
type Forwarded struct {
	// For is the client's address, without its port.
	For string
	// Proto and Port are the listener's scheme and port.
	Proto, Port string
	// RequestID is written as X-Request-ID when the client sent none.
	RequestID []byte
}

// AppendRequest appends the head a pod receives for r: the client's
// head less its hop-by-hop fields, with Host passed through and the
// forwarded fields set.
func AppendRequest(b []byte, r *Request, f *Forwarded) []byte {
	b = append(append(append(append(b, r.Method...), ' '), r.Target...), " HTTP/1.1\r\nHost: "...)
	b = append(append(b, r.Host...), "\r\n"...)
	b = appendFields(b, r.Fields)
	b = append(append(b, "X-Forwarded-For: "...), f.For...)
	b = append(append(b, "\r\nX-Forwarded-Host: "...), r.Host...)
	b = append(append(b, "\r\nX-Forwarded-Proto: "...), f.Proto...)
	b = append(append(b, "\r\nX-Forwarded-Port: "...), f.Port...)
	b = append(append(b, "\r\nX-Real-IP: "...), f.For...)
	b = append(b, "\r\n"...)
	if r.RequestID == nil {
		b = append(append(append(b, "X-Request-ID: "...), f.RequestID...), "\r\n"...)
	}
	return append(b, "\r\n"...)
}

// AppendResponse appends the head the client receives for a pod's answer
// r: its fields, with the body framed by its length or, when it has none,
// in chunks; noBody: the answer has no body (NoBody); close: the
// connection closes after it.
func AppendResponse(b []byte, r *Response, noBody, close bool) []byte {
	b = strconv.AppendInt(append(b, "HTTP/1.1 "...), int64(r.Status), 10)
	b = append(append(append(b, ' '), r.Reason...), "\r\n"...)
	b = appendFields(b, r.Fields)
	switch {
	case r.ContentLength >= 0 && r.Status != http.StatusNoContent: // a HEAD's and a 304's too
		b = strconv.AppendInt(append(b, "Content-Length: "...), r.ContentLength, 10)
		b = append(b, "\r\n"...)
	case !noBody && r.ContentLength < 0:
		b = append(b, "Transfer-Encoding: chunked\r\n"...)
	}
	if close {
		b = append(b, "Connection: close\r\n"...)
	}
	return append(b, "\r\n"...)
}

// AppendError appends a whole plain-text answer with status, as
// net/http's Error writes it; head: the request was a HEAD (no body).
func AppendError(b []byte, status int, text string, head, close bool) []byte {
	text += "\n"
	b = strconv.AppendInt(append(b, "HTTP/1.1 "...), int64(status), 10)
	b = append(append(append(b, ' '), http.StatusText(status)...), "\r\nContent-Type: text/plain; charset=utf-8\r\nX-Content-Type-Options: nosniff\r\nContent-Length: "...)
	b = append(strconv.AppendInt(b, int64(len(text)), 10), "\r\n"...)
	if close {
		b = append(b, "Connection: close\r\n"...)
	}
	b = append(b, "\r\n"...)
	if !head {
		b = append(b, text...)
	}
	return b
}

// AppendChunk appends data as one chunk of a chunked body (nothing for
// no data: an empty chunk would end the body).
func AppendChunk(b, data []byte) []byte {
	if len(data) == 0 {
		return b
	}
	b = append(strconv.AppendUint(b, uint64(len(data)), 16), "\r\n"...)
	return append(append(b, data...), "\r\n"...)
}

// LastChunk ends a chunked body, without a trailer.
const LastChunk = "0\r\n\r\n"

func appendFields(b []byte, fields []Field) []byte {
	for _, f := range fields {
		b = append(append(append(append(b, f.Name...), ": "...), f.Value...), "\r\n"...)
	}
	return b
}
