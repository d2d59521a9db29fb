package proxy

import (
	"bytes"
	"net"
	"time"

	"github.com/svcnet/svcnet/internal/ingress/annotations"
	"github.com/svcnet/svcnet/internal/ingress/engine"
	"github.com/svcnet/svcnet/internal/ingress/route"
	"github.com/svcnet/svcnet/internal/ingress/upstream"
)

// NewEngine starts the event loops (Options.EventLoops) that serve a
// plain HTTP listener on port; header and idle bound a client's waits
// for a request; toNetHTTP gives net/http what the engine leaves to it.
func (p *Proxy) NewEngine(port int, header, idle time.Duration, toNetHTTP func(net.Conn)) (*engine.Engine, error) {
	return engine.New(engineHandler{p, port}, engine.Options{
		Loops: p.opts.EventLoops, Port: port, Header: header, Idle: idle, Write: p.opts.SendTimeout,
		Connect: p.opts.ConnectTimeout, Read: p.opts.ReadTimeout, MaxIdle: p.opts.MaxIdlePerEndpoint,
		ToNetHTTP: toNetHTTP,
	})
}

// engineHandler routes and records the engine's requests as the
// net/http handler does its own.
type engineHandler struct {
	p    *Proxy
	port int
}

// connState is what the handler keeps per client connection.
type connState struct {
	x   *engine.Exchange
	req route.Request
	obs *routeObs // the metrics of the route served last
}

// header reads a field of the connection's current request.
func (s *connState) header(name string) string {
	for _, f := range s.x.Head.Fields {
		if bytes.EqualFold(f.Name, []byte(name)) {
			return string(f.Value)
		}
	}
	return ""
}

// query is the connection's current request's raw query.
func (s *connState) query() string {
	if q := len(s.x.Head.Path) + 1; q < len(s.x.Head.Target) {
		return string(s.x.Head.Target[q:])
	}
	return ""
}

// Route decides a request the engine parsed; it declines what the
// net/http handler does differently: no route (404), a path to clean,
// annotations that change the exchange, no endpoint (503).
func (h engineHandler) Route(x *engine.Exchange) bool {
	cfg := h.p.cfg.Load()
	if cfg == nil {
		return false
	}
	if clean, ok := route.CleanPath(x.Path); !ok || clean != x.Path {
		return false
	}
	s, _ := x.Data.(*connState)
	if s == nil {
		s = &connState{x: x}
		s.req.Header, s.req.Query = s.header, s.query // bound once per connection
		x.Data = s
	}
	s.req.Host, s.req.Path, s.req.Method, s.req.Port = x.Host, x.Path, method(x.Head.Method), h.port
	rt := cfg.router.Route(&s.req)
	if rt == nil || !plain(rt) {
		return false
	}
	up := cfg.ups[rt.Backend]
	eps := up.Load().Addrs
	if len(eps) == 0 {
		return false
	}
	x.Route, x.Up, x.Endpoints, x.Start = rt, up, eps, up.Pick(len(eps))
	if a := rt.Config; a != nil {
		x.Timeouts = upstream.Timeouts{Connect: a.ConnectTimeout, Read: a.ReadTimeout, Send: a.SendTimeout}
	}
	return true
}

// Done counts and logs a request served.
func (h engineHandler) Done(x *engine.Exchange) {
	p := h.p
	d := time.Since(x.Began)
	s := x.Data.(*connState)
	if s.obs == nil || s.obs.route != x.Route || s.obs.up != x.Up {
		s.obs = p.metrics.forRoute(x.Route, x.Up)
	}
	s.obs.observe(x.Status, d)
	if p.log != nil {
		p.log.write(&logEntry{remote: x.Remote, method: string(x.Head.Method), host: x.Host, path: x.Path,
			route: x.Route, up: x.Up, upstream: x.Upstream, id: string(x.ID), status: x.Status, bytes: x.Bytes, d: d})
	}
}

func (h engineHandler) DialFailed() { h.p.metrics.connectErrors.Inc() }

func (h engineHandler) WriteTimedOut() { h.p.metrics.sendTimeouts.Inc() }

// plain reports whether a route's annotations leave its requests to the
// engine: none of them changes the exchange but the timeouts.
func plain(rt *route.Route) bool {
	if rt.RedirectHTTPS || rt.Canary != nil || rt.Answer != 0 || !rt.HTTPRule.Plain() {
		return false
	}
	a := rt.Config
	return a == nil || (a.RewriteTarget == "" && (a.BackendProtocol == "" || a.BackendProtocol == annotations.HTTP) &&
		len(a.SourceRanges) == 0 && a.Affinity == nil && a.Canary == nil)
}

// method is a request's method as a string, without allocating for the
// common ones.
func method(b []byte) string {
	switch string(b) {
	case "GET":
		return "GET"
	case "HEAD":
		return "HEAD"
	case "POST":
		return "POST"
	case "PUT":
		return "PUT"
	case "DELETE":
		return "DELETE"
	case "OPTIONS":
		return "OPTIONS"
	}
	return string(b)
}
