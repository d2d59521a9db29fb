// Package h1 reads the heads of HTTP/1.1 requests and responses for the
// ingress's engine, without allocating: the fields are slices of the
// buffer they were read from.
//
// It accepts a strict subset of what RFC 9112 allows, the requests a
// proxy can forward as they are. A head outside that subset is not an
// error here but a head for net/http's full server, which then accepts
// it or answers 400/431 as it always did: ParseRequest says so with ok
// false. So the engine never decides what is malformed; it only
// declines.
package h1

import "bytes"

// Field is one header field as it came: the name in the client's case.
type Field struct{ Name, Value []byte }

// Request is a request head that the engine can forward.
type Request struct {
	Method []byte
	// Target is the request target in origin form ("/path?query"), with
	// no '%' (the path is matched as it is, no decoding to mirror), no
	// fragment and no byte outside the URI characters.
	Target []byte
	// Path is Target up to its '?'.
	Path []byte
	Host []byte
	// Close: the client asked to close the connection after the answer.
	Close bool
	// RequestID is the first non-empty X-Request-ID, nil for none.
	RequestID []byte
	// Fields are the fields to forward: all but Host, the hop-by-hop
	// ones, the X-Forwarded-* family, X-Real-IP, Forwarded and empty
	// X-Request-IDs, which the proxy writes itself.
	Fields []Field
}

// MaxFields bounds the fields of a request head; more go to net/http.
const MaxFields = 64

// ParseRequest reads the request head at the start of b into r, reusing
// r.Fields' storage. n is the head's length with its empty line, 0 when b
// does not hold the whole head yet. ok false: the head is for net/http —
// a body or an upgrade, HTTP/1.0, a '%' in the path, an absolute target,
// obsolete line folding, a bare LF, anything malformed.
func ParseRequest(b []byte, r *Request) (n int, ok bool) {
	*r = Request{Fields: r.Fields[:0]}
	line, rest, complete, ok := nextLine(b)
	if !complete || !ok {
		return 0, ok
	}
	// method SP target SP HTTP/1.1
	sp := bytes.IndexByte(line, ' ')
	if sp <= 0 || !isToken(line[:sp]) {
		return 0, false
	}
	r.Method = line[:sp]
	line = line[sp+1:]
	sp = bytes.IndexByte(line, ' ')
	if sp <= 0 || string(line[sp+1:]) != "HTTP/1.1" || !validTarget(line[:sp]) {
		return 0, false
	}
	r.Target = line[:sp]
	r.Path = r.Target
	if q := bytes.IndexByte(r.Target, '?'); q >= 0 {
		r.Path = r.Target[:q]
	}
	hosts := 0
	for {
		name, value, end, complete, ok := nextField(b, &rest)
		if !complete || !ok {
			return 0, ok
		}
		if end > 0 {
			if hosts != 1 {
				return 0, false
			}
			return end, true
		}
		switch fieldKind(name) {
		case kindHost:
			if hosts++; hosts > 1 || !validHost(value) {
				return 0, false
			}
			r.Host = value
		case kindDecline:
			return 0, false
		case kindContentLength:
			// A body is net/http's; "0" is no body and passes on.
			if string(value) != "0" {
				return 0, false
			}
			if !r.add(name, value) {
				return 0, false
			}
		case kindConnection:
			// Other tokens would name more hop-by-hop fields.
			for tok := range bytes.SplitSeq(value, []byte(",")) {
				switch tok = bytes.TrimSpace(tok); {
				case bytes.EqualFold(tok, []byte("close")):
					r.Close = true
				case bytes.EqualFold(tok, []byte("keep-alive")), len(tok) == 0:
				default:
					return 0, false
				}
			}
		case kindDrop:
		case kindRequestID:
			if len(value) == 0 {
				continue
			}
			if r.RequestID == nil {
				r.RequestID = value
			}
			if !r.add(name, value) {
				return 0, false
			}
		default:
			if !r.add(name, value) {
				return 0, false
			}
		}
	}
}

func (r *Request) add(name, value []byte) bool {
	if len(r.Fields) == MaxFields {
		return false
	}
	r.Fields = append(r.Fields, Field{Name: name, Value: value})
	return true
}

// Response is a pod's response head.
type Response struct {
	Status int
	// Reason is the status line's text after the code (may be empty).
	Reason []byte
	// ContentLength is the body's length, -1 when not given.
	ContentLength int64
	// Chunked: the body comes in chunks.
	Chunked bool
	// Close: the pod closes the connection after this answer (it said
	// so, or it answered HTTP/1.0 without keep-alive).
	Close bool
	// Fields are the fields to pass on: all but Content-Length,
	// Transfer-Encoding and the hop-by-hop ones.
	Fields []Field
}

// ParseResponse reads the response head at the start of b into r,
// reusing r.Fields' storage; n and ok as ParseRequest's. ok false is a
// head the engine cannot frame: a transfer coding other than chunked,
// conflicting lengths, a malformed line.
func ParseResponse(b []byte, r *Response) (n int, ok bool) {
	*r = Response{Fields: r.Fields[:0], ContentLength: -1}
	line, rest, complete, ok := nextLine(b)
	if !complete || !ok {
		return 0, ok
	}
	// HTTP/1.x SP 3DIGIT [SP reason]
	if len(line) < 12 || string(line[:7]) != "HTTP/1." || (line[7] != '0' && line[7] != '1') || line[8] != ' ' {
		return 0, false
	}
	http10 := line[7] == '0'
	for _, c := range line[9:12] {
		if c < '0' || c > '9' {
			return 0, false
		}
		r.Status = r.Status*10 + int(c-'0')
	}
	if r.Status < 100 {
		return 0, false
	}
	if len(line) > 12 {
		if line[12] != ' ' {
			return 0, false
		}
		r.Reason = line[13:]
		for _, c := range r.Reason {
			if (c < 0x20 && c != '\t') || c == 0x7f {
				return 0, false // a bare CR, say: passed on, it would split the line
			}
		}
	}
	keepAlive := false
	var listed [][]byte // named by Connection: hop-by-hop too
	for {
		name, value, end, complete, ok := nextField(b, &rest)
		if !complete || !ok {
			return 0, ok
		}
		if end > 0 {
			n = end
			break
		}
		switch fieldKind(name) {
		case kindContentLength:
			l, ok := parseLength(value)
			if !ok || (r.ContentLength >= 0 && r.ContentLength != l) {
				return 0, false
			}
			r.ContentLength = l
		case kindDecline:
			if bytes.EqualFold(name, []byte("Transfer-Encoding")) {
				if r.Chunked || !bytes.EqualFold(value, []byte("chunked")) {
					return 0, false
				}
				r.Chunked = true
			}
			// Upgrade, TE, Expect, HTTP2-Settings: hop-by-hop here.
		case kindConnection:
			for tok := range bytes.SplitSeq(value, []byte(",")) {
				switch tok = bytes.TrimSpace(tok); {
				case bytes.EqualFold(tok, []byte("close")):
					r.Close = true
				case bytes.EqualFold(tok, []byte("keep-alive")):
					keepAlive = true
				case len(tok) > 0:
					listed = append(listed, tok)
				}
			}
		case kindDrop:
			if isHopByHop(name) {
				continue
			}
			r.Fields = append(r.Fields, Field{Name: name, Value: value})
		default:
			r.Fields = append(r.Fields, Field{Name: name, Value: value})
		}
	}
	if r.Chunked {
		if http10 {
			return 0, false // faulty framing (RFC 9112 6.1): net/http's to judge
		}
		r.ContentLength = -1 // the coding decides (RFC 9112 6.3)
	}
	if http10 && !keepAlive {
		r.Close = true
	}
	if len(listed) > 0 {
		kept := r.Fields[:0]
		for _, f := range r.Fields {
			if !containsFold(listed, f.Name) {
				kept = append(kept, f)
			}
		}
		r.Fields = kept
	}
	return n, true
}

// NoBody reports whether a response with this status to a request with
// this method has no body, whatever its fields say.
func NoBody(method []byte, status int) bool {
	return string(method) == "HEAD" || status < 200 || status == 204 || status == 304
}

func containsFold(list [][]byte, s []byte) bool {
	for _, l := range list {
		if bytes.EqualFold(l, s) {
			return true
		}
	}
	return false
}

// nextLine splits the first CRLF-terminated line off b. complete is false
// when b holds no line end yet; ok is false for a bare LF or a control
// byte, which net/http judges.
func nextLine(b []byte) (line, rest []byte, complete, ok bool) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return nil, nil, false, true
	}
	if i == 0 || b[i-1] != '\r' {
		return nil, nil, true, false
	}
	return b[:i-1], b[i+1:], true, true
}

// nextField reads the field line at the start of *rest, a tail of the
// head b, and moves *rest past it. At the head's empty line end is the
// head's length; complete and ok as nextLine's, ok false for a malformed
// field too.
func nextField(b []byte, rest *[]byte) (name, value []byte, end int, complete, ok bool) {
	start := len(b) - len(*rest)
	line, after, complete, ok := nextLine(*rest)
	if !complete || !ok {
		return nil, nil, 0, complete, ok
	}
	*rest = after
	if len(line) == 0 {
		return nil, nil, start + 2, true, true
	}
	name, value, ok = splitField(line)
	return name, value, 0, true, ok
}

// splitField splits "name: value", trimming the value's surrounding
// spaces and tabs. A line that starts with a space or tab (obsolete
// folding), a name that is not a token, or a control byte or non-ASCII
// byte in the value is refused.
func splitField(line []byte) (name, value []byte, ok bool) {
	colon := bytes.IndexByte(line, ':')
	if colon <= 0 || !isToken(line[:colon]) {
		return nil, nil, false
	}
	v := line[colon+1:]
	for len(v) > 0 && (v[0] == ' ' || v[0] == '\t') {
		v = v[1:]
	}
	for len(v) > 0 && (v[len(v)-1] == ' ' || v[len(v)-1] == '\t') {
		v = v[:len(v)-1]
	}
	for _, c := range v {
		if (c < 0x20 && c != '\t') || c >= 0x7f {
			return nil, nil, false
		}
	}
	return line[:colon], v, true
}

type kind uint8

const (
	kindForward       kind = iota
	kindHost               // Host
	kindContentLength      // Content-Length
	kindConnection         // Connection
	kindRequestID          // X-Request-ID
	kindDecline            // needs net/http in a request: Transfer-Encoding, Upgrade, Expect, TE, HTTP2-Settings
	kindDrop               // hop-by-hop, or written by the proxy itself
)

// fieldKind sorts a field name, in any case.
func fieldKind(name []byte) kind {
	for _, k := range kinds {
		if len(k.name) == len(name) && bytes.EqualFold(k.name, name) {
			return k.kind
		}
	}
	return kindForward
}

var kinds = []struct {
	name []byte
	kind kind
}{
	{[]byte("Host"), kindHost},
	{[]byte("Content-Length"), kindContentLength},
	{[]byte("Connection"), kindConnection},
	{[]byte("X-Request-ID"), kindRequestID},
	{[]byte("Transfer-Encoding"), kindDecline},
	{[]byte("Upgrade"), kindDecline},
	{[]byte("Expect"), kindDecline},
	{[]byte("TE"), kindDecline},
	{[]byte("HTTP2-Settings"), kindDecline},
	{[]byte("Keep-Alive"), kindDrop},
	{[]byte("Proxy-Connection"), kindDrop},
	{[]byte("Proxy-Authenticate"), kindDrop},
	{[]byte("Proxy-Authorization"), kindDrop},
	{[]byte("Trailer"), kindDrop},
	{[]byte("X-Forwarded-For"), kindDrop},
	{[]byte("X-Forwarded-Host"), kindDrop},
	{[]byte("X-Forwarded-Proto"), kindDrop},
	{[]byte("X-Forwarded-Port"), kindDrop},
	{[]byte("X-Real-IP"), kindDrop},
	{[]byte("Forwarded"), kindDrop},
}

// HopByHop are the fields that concern one connection only (RFC 9110
// 7.6.1, and the Proxy-* and Keep-Alive of older practice), never passed
// on; fields a Connection field names are too.
var HopByHop = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// isHopByHop reports whether name is one of HopByHop, in any case.
func isHopByHop(name []byte) bool {
	for _, h := range HopByHop {
		if len(h) == len(name) && bytes.EqualFold(name, []byte(h)) {
			return true
		}
	}
	return false
}

// parseLength reads a Content-Length: digits only, at most 18 of them.
func parseLength(v []byte) (int64, bool) {
	if len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

var tokenChars = chars("!#$%&'*+-.^_`|~")

// chars is a table of the letters, the digits and extra.
func chars(extra string) (t [256]bool) {
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for _, c := range extra {
		t[c] = true
	}
	return t
}

func isToken(b []byte) bool { return only(b, &tokenChars) }

// only reports whether b is not empty and all its bytes are in t.
func only(b []byte, t *[256]bool) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if !t[c] {
			return false
		}
	}
	return true
}

// targetChars are a path's and query's characters (RFC 3986 pchar, '/'
// and '?'), without '%'.
var targetChars = chars("-._~!$&'()*+,;=:@/?")

func validTarget(b []byte) bool { return len(b) > 0 && b[0] == '/' && only(b, &targetChars) }

// hostChars are a Host's: a name, an IPv4 or bracketed IPv6 address, a
// port.
var hostChars = chars("-._:[]")

func validHost(b []byte) bool { return only(b, &hostChars) }
