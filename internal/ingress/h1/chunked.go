package h1

import (
	"bytes"
	"errors"
)

// Chunks reads a chunked body (RFC 9112 7.1) as it arrives, in whatever
// pieces: Next takes what is buffered and gives back the data. Chunk
// extensions are ignored and the trailer skipped, so the body can be
// passed on in chunks of the proxy's own, without a trailer (as
// net/http's reverse proxy passes one on without an announced trailer).
type Chunks struct {
	state   int
	left    uint64 // of the current chunk's data
	trailer int    // trailer lines read
}

const (
	chunkSize = iota
	chunkData
	chunkEnd // the CRLF after a chunk's data
	chunkTrailer
	chunksDone
)

// maxChunkLine bounds a chunk's size line and a trailer line; maxTrailer
// the trailer's lines.
const (
	maxChunkLine = 4 << 10
	maxTrailer   = 64
)

// ErrChunks is a chunked body that is not one.
var ErrChunks = errors.New("malformed chunked body")

// Next reads from the start of b: used is how much of b it consumed,
// data the body's bytes among them (a slice of b), done whether the body
// ended. It consumes less than b when a line is incomplete (then call it
// again with more) or after data, which it returns one piece at a time.
func (c *Chunks) Next(b []byte) (used int, data []byte, done bool, err error) {
	for used < len(b) || c.state == chunksDone {
		rest := b[used:]
		switch c.state {
		case chunksDone:
			return used, nil, true, nil
		case chunkData:
			n := min(uint64(len(rest)), c.left)
			c.left -= n
			if c.left == 0 {
				c.state = chunkEnd
			}
			return used + int(n), rest[:n], false, nil
		}
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			if len(rest) > maxChunkLine {
				return used, nil, false, ErrChunks
			}
			return used, nil, false, nil
		}
		line := rest[:i]
		if len(line) == 0 || line[len(line)-1] != '\r' {
			return used, nil, false, ErrChunks // a bare LF
		}
		line = line[:len(line)-1]
		used += i + 1
		switch c.state {
		case chunkSize:
			if j := bytes.IndexByte(line, ';'); j >= 0 {
				line = line[:j] // an extension
			}
			line = bytes.TrimRight(line, " \t")
			size, ok := parseHex(line)
			if !ok {
				return used, nil, false, ErrChunks
			}
			c.left = size
			c.state = chunkData
			if size == 0 {
				c.state = chunkTrailer
			}
		case chunkEnd:
			if len(line) != 0 {
				return used, nil, false, ErrChunks
			}
			c.state = chunkSize
		case chunkTrailer:
			if len(line) == 0 {
				c.state = chunksDone
				return used, nil, true, nil
			}
			if c.trailer++; c.trailer > maxTrailer {
				return used, nil, false, ErrChunks
			}
		}
	}
	return used, nil, false, nil
}

// parseHex parses a chunk size: 1 to 15 hex digits.
func parseHex(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 15 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		switch {
		case '0' <= c && c <= '9':
			n = n<<4 | uint64(c-'0')
		case 'a' <= c && c <= 'f':
			n = n<<4 | uint64(c-'a'+10)
		case 'A' <= c && c <= 'F':
			n = n<<4 | uint64(c-'A'+10)
		default:
			return 0, false
		}
	}
	return n, true
}
