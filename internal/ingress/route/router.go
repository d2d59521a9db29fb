package route

// Request is what a route is chosen by.
type Request struct {
	// Host is the Host header as the client sent it; Path the cleaned
	// path (CleanPath).
	Host, Path string
	Method     string
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
