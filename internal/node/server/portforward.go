package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"k8s.io/cri-streaming/pkg/streaming/portforward"

	"github.com/svcnet/svcnet/internal/netns"
)

// servePortForward is kubelet's /portForward/{ns}/{pod}: kubectl
// port-forward's streams (SPDY, or WebSocket), each copied to a port on
// the pod's loopback — inside its network namespace, so that a server
// listening on 127.0.0.1 in the pod is reached too, as with a container
// runtime.
func (s *Server) servePortForward(w http.ResponseWriter, r *http.Request) {
	ns, pod := r.PathValue("ns"), r.PathValue("pod")
	opts, err := portforward.NewV4Options(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	wp, err := s.pod(ns, pod)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	portforward.ServePortForward(w, r, &forwarder{s: s, ns: ns}, pod, string(wp.Pod.UID), opts,
		4*time.Hour, 30*time.Second, portforward.SupportedProtocols)
}

// forwarder connects port-forward streams to pods.
type forwarder struct {
	s  *Server
	ns string
}

func (f *forwarder) PortForward(ctx context.Context, pod, _ string, port int32, stream io.ReadWriteCloser) error {
	defer stream.Close()
	wp, err := f.s.pod(f.ns, pod)
	if err != nil {
		return err
	}
	t := wp.Exec
	if t == nil {
		return fmt.Errorf("pod %s has not started yet", pod)
	}
	if port <= 0 || port > 65535 {
		return fmt.Errorf("invalid port %d", port)
	}
	conn, err := netns.DialContext(ctx, t.Netns, "tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))))
	if err != nil {
		return fmt.Errorf("failed to connect to localhost:%d inside namespace of pod %s: %w", port, pod, err)
	}
	defer conn.Close()
	go func() {
		_, _ = io.Copy(conn, stream)
		// The client is done sending; the pod may still answer.
		_ = conn.(*net.TCPConn).CloseWrite()
	}()
	done := make(chan struct{})
	go func() { _, _ = io.Copy(stream, conn); close(done) }()
	select {
	case <-done: // the pod's side is finished
	case <-ctx.Done():
	}
	return nil
}
