package freeport

import (
	"io"
	"net"
	"testing"
)

func TestServe(t *testing.T) {
	addr := Serve(t, func(c net.Conn) { _, _ = io.WriteString(c, "hello") })
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		// The server closes the connection after serving it: ReadAll ends.
		b, err := io.ReadAll(c)
		c.Close()
		if err != nil || string(b) != "hello" {
			t.Fatalf("read %q, %v", b, err)
		}
	}
}
