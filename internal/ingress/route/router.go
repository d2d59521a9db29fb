package route

// Request is what a route is chosen by.
type Request struct {
	// Host is the Host header as the client sent it; Path the cleaned
	// path (CleanPath).
	Host, Path string
	Method     string
	// Port is the proxy's listener port the request came to: a
	// Gateway's listeners have ports of their own (Mux).
	Port int
	// Query returns the request's raw query ("" for none; nil for
	// none too). A function, as Header is, so that the Ingress engine's
	// requests, which no query decides, copy nothing.
	Query func() string
	// Header returns the value of a request field ("" for none).
	Header func(name string) string
}

// Router chooses the route of a request: the Ingress rules' Table is one,
// and the Gateway API's HTTPRoutes can be another, beside it. Every
// engine of the ingress reaches routing only through it.
type Router interface {
	// Route returns the request's route, nil for none (404).
	Route(r *Request) *Route
	// BackendRefs are the backends of the routes; Route.Backend indexes
	// them.
	BackendRefs() []BackendRef
}

// Route matches by host and path, as Ingress rules do.
func (t *Table) Route(r *Request) *Route { return t.Match(r.Host, r.Path) }

// BackendRefs are the table's backends.
func (t *Table) BackendRefs() []BackendRef { return t.Backends }

// Mux routes a request by the listener port it came to: the ports of
// Gateways' listeners to their routers, every other port to Default
// (the Ingress rules). Every router's routes index Backends.
type Mux struct {
	Default  Router
	ByPort   map[int]Router
	Backends []BackendRef
}

// Route asks the router of the request's port.
func (m *Mux) Route(r *Request) *Route {
	if rt, ok := m.ByPort[r.Port]; ok {
		return rt.Route(r)
	}
	return m.Default.Route(r)
}

// BackendRefs are the backends of every router.
func (m *Mux) BackendRefs() []BackendRef { return m.Backends }
