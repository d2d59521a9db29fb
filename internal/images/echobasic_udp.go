package images

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"
)

// echo-basic's UDP server (UDP_ECHO_SERVER set), which UDPRoute tests
// reach: on UDP_PORT (8080) it answers each datagram with one of JSON,
// echoBasicUDPAnswer: the datagram's bytes as a string and the pod.

// echoBasicUDPAnswer is the answer to a datagram.
type echoBasicUDPAnswer struct {
	Request string `json:"request"`
	echoBasicPod
}

func (e *echoBasic) serveUDP(ctx context.Context) error {
	port, err := e.port("UDP_PORT", "8080")
	if err != nil {
		return err
	}
	pc, err := (&net.ListenConfig{}).ListenPacket(ctx, "udp", net.JoinHostPort(e.bindHost, port))
	if err != nil {
		return fmt.Errorf("echo-basic: udp server: %w", err)
	}
	e.announce("udp", pc.LocalAddr())
	stop := context.AfterFunc(ctx, func() { pc.Close() })
	defer stop()
	defer pc.Close()
	pod := e.pod()
	buf := make([]byte, 64<<10)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			e.logf("udp: %v", err)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		answer, err := json.Marshal(echoBasicUDPAnswer{Request: string(buf[:n]), echoBasicPod: pod})
		if err != nil {
			return err
		}
		if _, err := pc.WriteTo(answer, from); err != nil {
			e.logf("udp answer to %s: %v", from, err)
		}
	}
}
