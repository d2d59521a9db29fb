package engine

import (
	"errors"
	"math"
	"net"
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	// roomMargin is what Room keeps back of a socket's free space for
	// the bytes a server buffers in front of the connection and sends
	// with the caller's (net/http's 4 KiB writer) and for TLS records'
	// overhead.
	roomMargin = 4 << 10
	// minRoom is the least Room reports once the kernel calls the
	// socket writable: a write of that much may still wait a little,
	// where waiting for more could wait for ever on a small socket.
	minRoom = 1 << 10
)

// Room is how many bytes a write to c takes now without waiting for the
// client, when c is a socket (math.MaxInt when that cannot be told).
// While the client has taken too little for that to be any, Room waits,
// as a write does, the send timeout at most: then it closes c, counts
// the timeout and fails. A writer that reads what it writes only once
// Room has told it how much holds no buffer for a client that takes
// nothing: what the client did not take stays where it came from.
//
// The kernel counts a socket's send buffer in the memory its buffers
// take, not in bytes: Room is half of what it has free (the overhead
// of small writes), less roomMargin.
func (c *writeTimeoutConn) Room() (int, error) {
	if c.raw == nil {
		return math.MaxInt, nil
	}
	if err := c.raw.Control(c.measure); err != nil || c.roomErr != nil {
		return math.MaxInt, nil
	}
	if c.room >= minRoom {
		return c.room, nil
	}
	start := time.Now()
	for {
		dl := start.Add(c.d).UnixNano()
		own := c.own.Load()
		if own != 0 {
			dl = min(dl, own)
		}
		_ = c.Conn.SetWriteDeadline(time.Unix(0, dl))
		err := c.raw.Write(writable)
		if err == nil {
			_ = c.raw.Control(c.measure)
			return max(c.room, minRoom), nil
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			return 0, err
		}
		now := time.Now()
		switch {
		case own != 0 && now.UnixNano() >= own:
			return 0, err // the user's own deadline
		case now.Sub(start) >= c.d:
			c.timeOut()
			return 0, err
		}
	}
}

// measureRoom sets room to what Room reports of the socket fd, before a
// wait (measure is it as a function value, made once).
func (c *writeTimeoutConn) measureRoom(fd uintptr) {
	free, err := socketRoom(fd)
	c.room, c.roomErr = free/2-roomMargin, err
}

// rawConn is the socket under c, through the connections that wrap it;
// nil if none.
func rawConn(c net.Conn) syscall.RawConn {
	for {
		if sc, ok := c.(syscall.Conn); ok {
			rc, err := sc.SyscallConn()
			if err != nil {
				return nil
			}
			return rc
		}
		w, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		c = w.NetConn()
	}
}

// socketRoom is how much of the socket's send buffer is free, as the
// kernel counts it.
func socketRoom(fd uintptr) (int, error) {
	var mem [unix.SK_MEMINFO_VARS]uint32
	size := uint32(unsafe.Sizeof(mem))
	_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, fd, unix.SOL_SOCKET, unix.SO_MEMINFO,
		uintptr(unsafe.Pointer(&mem)), uintptr(unsafe.Pointer(&size)), 0)
	if errno != 0 {
		return 0, errno
	}
	return int(mem[unix.SK_MEMINFO_SNDBUF]) - int(mem[unix.SK_MEMINFO_WMEM_QUEUED]), nil
}

// writable reports whether the kernel calls the socket writable (or
// failed: the write that follows tells how).
func writable(fd uintptr) bool {
	p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
	n, err := unix.Poll(p, 0)
	return err != nil || n > 0
}
