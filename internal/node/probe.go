package node

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// probeKind is readiness, liveness or startup.
type probeKind string

const (
	readiness probeKind = "Readiness"
	liveness  probeKind = "Liveness"
	startup   probeKind = "Startup"
	// listening is svcnet's implicit readiness of a container without a
	// readiness probe: its declared TCP ports accept connections.
	listening probeKind = "Listening"
)

// listenWait bounds how long a container without a readiness probe is
// held unready while its declared TCP ports do not accept connections.
const listenWait = 10 * time.Second

// tcpPorts are the container's declared TCP ports.
func tcpPorts(c *corev1.Container) []int32 {
	var out []int32
	for _, p := range c.Ports {
		if p.Protocol == "" || p.Protocol == corev1.ProtocolTCP {
			out = append(out, p.ContainerPort)
		}
	}
	return out
}

// waitListening reports a container without a readiness probe ready once
// every declared TCP port accepts a connection, or once wait is over. In
// Kubernetes such a container is ready the moment it starts, and a
// Service sends it connections before its server listens; here they wait
// for the server, at most wait, so a container whose declared port never
// opens still becomes ready, only later.
func waitListening(ctx context.Context, container string, ports []int32, podIP netip.Addr, gen int, wait time.Duration, out chan<- probeResult) {
	deadline := time.Now().Add(wait)
	pending := append([]int32(nil), ports...)
	for len(pending) > 0 && time.Now().Before(deadline) {
		addr := net.JoinHostPort(podIP.String(), strconv.Itoa(int(pending[0])))
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			pending = pending[1:]
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(25 * time.Millisecond):
		}
	}
	select {
	case out <- probeResult{container: container, kind: listening, ok: true, gen: gen}:
	case <-ctx.Done():
	}
}

// probeResult is one change of a probe's verdict.
type probeResult struct {
	container string
	kind      probeKind
	ok        bool
	message   string
	gen       int // the container start it belongs to
}

// prober runs one probe of one container start until ctx ends, sending
// its verdict whenever it changes (after the thresholds).
type prober struct {
	kind      probeKind
	probe     *corev1.Probe
	container *corev1.Container
	podIP     netip.Addr
	exec      func(cmd []string, timeout time.Duration) ([]byte, int, error)
	gen       int
	out       chan<- probeResult
}

func (p *prober) run(ctx context.Context) {
	pr := p.probe
	select {
	case <-ctx.Done():
		return
	case <-time.After(time.Duration(pr.InitialDelaySeconds) * time.Second):
	}
	period := time.Duration(max(pr.PeriodSeconds, 1)) * time.Second
	successes, failures := 0, 0
	var verdict *bool
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		ok, msg := p.once(ctx)
		if ok {
			successes, failures = successes+1, 0
		} else {
			failures, successes = failures+1, 0
		}
		var now *bool
		switch {
		case ok && successes >= int(max(pr.SuccessThreshold, 1)):
			now = ptrBool(true)
		case !ok && failures >= int(max(pr.FailureThreshold, 1)):
			now = ptrBool(false)
		}
		if now != nil && (verdict == nil || *verdict != *now) {
			verdict = now
			select {
			case p.out <- probeResult{container: p.container.Name, kind: p.kind, ok: *now, message: msg, gen: p.gen}:
			case <-ctx.Done():
				return
			}
		}
		// A startup probe stops once it has succeeded.
		if p.kind == startup && verdict != nil && *verdict {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func ptrBool(b bool) *bool { return &b }

// once runs the probe one time.
func (p *prober) once(ctx context.Context) (bool, string) {
	timeout := time.Duration(max(p.probe.TimeoutSeconds, 1)) * time.Second
	return runHandler(ctx, p.probe.ProbeHandler, p.container, p.podIP, p.exec, timeout)
}

// runHandler runs one probe or lifecycle-hook action against a container
// and reports whether it succeeded, and why not.
func runHandler(ctx context.Context, h corev1.ProbeHandler, container *corev1.Container, podIP netip.Addr,
	exec func(cmd []string, timeout time.Duration) ([]byte, int, error), timeout time.Duration) (bool, string) {
	switch {
	case h.HTTPGet != nil:
		port, err := resolvePort(h.HTTPGet.Port, container)
		if err != nil {
			return false, err.Error()
		}
		host := podIP.String()
		if h.HTTPGet.Host != "" {
			host = h.HTTPGet.Host
		}
		scheme := "http"
		if h.HTTPGet.Scheme == corev1.URISchemeHTTPS {
			scheme = "https"
		}
		url := fmt.Sprintf("%s://%s%s", scheme, net.JoinHostPort(host, strconv.Itoa(port)), h.HTTPGet.Path)
		rctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(rctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err.Error()
		}
		req.Header.Set("User-Agent", "kube-probe/1.37")
		for _, hd := range h.HTTPGet.HTTPHeaders {
			req.Header.Set(hd.Name, hd.Value)
		}
		resp, err := probeClient.Do(req)
		if err != nil {
			return false, fmt.Sprintf("Get %q: %v", url, err)
		}
		resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode >= 400 {
			return false, fmt.Sprintf("HTTP probe failed with statuscode: %d", resp.StatusCode)
		}
		return true, ""
	case h.TCPSocket != nil:
		port, err := resolvePort(h.TCPSocket.Port, container)
		if err != nil {
			return false, err.Error()
		}
		addr := net.JoinHostPort(podIP.String(), strconv.Itoa(port))
		c, err := net.DialTimeout("tcp", addr, timeout)
		if err != nil {
			return false, fmt.Sprintf("dial tcp %s: %v", addr, err)
		}
		c.Close()
		return true, ""
	case h.Exec != nil:
		out, code, err := exec(h.Exec.Command, timeout)
		if err != nil {
			return false, fmt.Sprintf("command %q: %v", h.Exec.Command, err)
		}
		if code != 0 {
			return false, fmt.Sprintf("command %q exited with %d: %s", h.Exec.Command, code, out)
		}
		return true, ""
	case h.GRPC != nil:
		return false, "gRPC probes are not supported by svcnet's node agent"
	}
	return false, "probe has no handler"
}

var probeClient = &http.Client{
	// Probes, like kubelet's, follow redirects only on the same host and
	// never keep connections (each probe is a fresh one).
	Transport: &http.Transport{DisableKeepAlives: true},
	CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) >= 10 || req.URL.Host != via[0].URL.Host {
			return http.ErrUseLastResponse
		}
		return nil
	},
}

// resolvePort turns a probe's port (number or container port name) into
// a number.
func resolvePort(port intstr.IntOrString, c *corev1.Container) (int, error) {
	if port.Type == intstr.Int {
		return port.IntValue(), nil
	}
	for _, p := range c.Ports {
		if p.Name == port.StrVal {
			return int(p.ContainerPort), nil
		}
	}
	if n, err := strconv.Atoi(port.StrVal); err == nil {
		return n, nil
	}
	return 0, fmt.Errorf("no container port named %q", port.StrVal)
}
