package proxy

import (
	"bufio"
	"io"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/svcnet/svcnet/internal/ingress/route"
	"github.com/svcnet/svcnet/internal/ingress/upstream"
)

// accessLog writes one JSON line per request through a buffer flushed
// every 100 ms, so that logging costs no write(2) per request.
type accessLog struct {
	mu   sync.Mutex
	w    *bufio.Writer
	line []byte
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

func newAccessLog(w io.Writer) *accessLog {
	l := &accessLog{w: bufio.NewWriterSize(w, 64<<10), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-l.stop:
				return
			case <-t.C:
				l.mu.Lock()
				_ = l.w.Flush()
				l.mu.Unlock()
			}
		}
	}()
	return l
}

// Close stops the flusher and writes what is buffered.
func (l *accessLog) Close() {
	l.once.Do(func() { close(l.stop) })
	<-l.done
	l.mu.Lock()
	_ = l.w.Flush()
	l.mu.Unlock()
}

// logEntry is what the access log says of a request.
type logEntry struct {
	remote, method, host, path string
	route                      *route.Route
	up                         *upstream.Upstream
	upstream, id               string
	status                     int
	bytes                      int64
	d                          time.Duration
}

func (l *accessLog) write(r *logEntry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.line[:0]
	b = append(b, `{"time":"`...)
	b = time.Now().UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","remote":`...)
	b = appendString(b, r.remote)
	b = append(b, `,"method":`...)
	b = appendString(b, r.method)
	b = append(b, `,"host":`...)
	b = appendString(b, r.host)
	b = append(b, `,"path":`...)
	b = appendString(b, r.path)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(r.status), 10)
	b = append(b, `,"bytes":`...)
	b = strconv.AppendInt(b, r.bytes, 10)
	b = append(b, `,"duration":`...)
	b = strconv.AppendFloat(b, r.d.Seconds(), 'f', 6, 64)
	if r.route != nil {
		b = append(b, `,"ingress":`...)
		b = appendString(b, r.route.Ingress.String())
	}
	if r.up != nil {
		b = append(b, `,"service":`...)
		b = appendString(b, r.up.Ref.String())
	}
	if r.upstream != "" {
		b = append(b, `,"upstream":`...)
		b = appendString(b, r.upstream)
	}
	if r.id != "" {
		b = append(b, `,"request_id":`...)
		b = appendString(b, r.id)
	}
	b = append(b, "}\n"...)
	_, _ = l.w.Write(b)
	l.line = b
}

// appendString appends s as a JSON string; invalid UTF-8 becomes U+FFFD.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
