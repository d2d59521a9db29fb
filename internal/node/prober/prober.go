// Package prober runs what kubelet's prober runs for a container:
// readiness, liveness and startup probes (httpGet, tcpSocket, exec), the
// lifecycle hooks (postStart, preStop, with sleep), and svcnet's wait for
// a probe-less container's declared ports. It reports verdicts on a
// channel and knows nothing of processes: exec is a function it is given.
package prober

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
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/node/podstate"
)

// Result is one change of a probe's verdict.
type Result struct {
	Container string
	Kind      podstate.ProbeKind
	OK        bool
	Message   string
	Gen       int // the container start it belongs to
}

// Exec runs a command in a container's pod with its environment.
type Exec func(cmd []string, timeout time.Duration) ([]byte, int, error)

// ListenWait bounds how long a container without a readiness probe is
// held unready while its declared TCP ports do not accept connections.
const ListenWait = 10 * time.Second

// WaitListening reports a container without a readiness probe ready once
// every declared TCP port accepts a connection, or once wait is over. In
// Kubernetes such a container is ready the moment it starts, and a
// Service sends it connections before its server listens; here they wait
// for the server, at most wait, so a container whose declared port never
// opens still becomes ready, only later.
func WaitListening(ctx context.Context, container string, ports []int32, podIP netip.Addr, gen int, wait time.Duration, out chan<- Result) {
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
	case out <- Result{Container: container, Kind: podstate.Listening, OK: true, Gen: gen}:
	case <-ctx.Done():
	}
}

// Prober runs one probe of one container start until ctx ends, sending
// its verdict whenever it changes (after the thresholds).
type Prober struct {
	Kind      podstate.ProbeKind
	Probe     *corev1.Probe
	Container *corev1.Container
	PodIP     netip.Addr
	Exec      Exec
	Gen       int
	Out       chan<- Result
}

// Run probes until ctx ends (a startup probe: until it has succeeded).
func (p *Prober) Run(ctx context.Context) {
	pr := p.Probe
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
			now = ptr.To(true)
		case !ok && failures >= int(max(pr.FailureThreshold, 1)):
			now = ptr.To(false)
		}
		if now != nil && (verdict == nil || *verdict != *now) {
			verdict = now
			select {
			case p.Out <- Result{Container: p.Container.Name, Kind: p.Kind, OK: *now, Message: msg, Gen: p.Gen}:
			case <-ctx.Done():
				return
			}
		}
		// A startup probe stops once it has succeeded.
		if p.Kind == podstate.Startup && verdict != nil && *verdict {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// once runs the probe one time.
func (p *Prober) once(ctx context.Context) (bool, string) {
	timeout := time.Duration(max(p.Probe.TimeoutSeconds, 1)) * time.Second
	return RunHandler(ctx, p.Probe.ProbeHandler, p.Container, p.PodIP, p.Exec, timeout)
}

// RunHandler runs one probe or lifecycle-hook action against a container
// and reports whether it succeeded, and why not.
func RunHandler(ctx context.Context, h corev1.ProbeHandler, container *corev1.Container, podIP netip.Addr, exec Exec, timeout time.Duration) (bool, string) {
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

// RunHook runs a lifecycle hook (postStart, preStop) for at most timeout.
func RunHook(ctx context.Context, h *corev1.LifecycleHandler, c *corev1.Container, podIP netip.Addr, exec Exec, timeout time.Duration) (bool, string) {
	if h.Sleep != nil {
		t := time.NewTimer(min(time.Duration(h.Sleep.Seconds)*time.Second, timeout))
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		return true, ""
	}
	return RunHandler(ctx, corev1.ProbeHandler{Exec: h.Exec, HTTPGet: h.HTTPGet, TCPSocket: h.TCPSocket}, c, podIP, exec, timeout)
}
