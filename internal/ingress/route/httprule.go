package route

import (
	"net/http"
	"strings"
	"time"
)

// HTTPRule is what a Gateway API HTTPRoute rule does to the requests it
// matches besides choosing their backend: its filters, resolved by the
// gateway package. A nil field does nothing.
type HTTPRule struct {
	RequestHeaders  *HeaderEdit
	ResponseHeaders *HeaderEdit
	// BackendRequestHeaders and BackendResponseHeaders are the chosen
	// backendRef's own filters, applied after the rule's.
	BackendRequestHeaders  *HeaderEdit
	BackendResponseHeaders *HeaderEdit
	Redirect               *Redirect
	Rewrite                *Rewrite
	// Timeout bounds a request from its head to its answer's end; the
	// proxy answers 504 when it runs out (0: no bound).
	Timeout time.Duration
	// Mirrors are backends that get a copy of the requests, whose
	// answers are dropped.
	Mirrors []Mirror
	// CORS answers preflights and marks answers to allowed origins.
	CORS *CORS
}

// Mirror sends a share of a rule's requests to a backend too.
type Mirror struct {
	// Backend indexes the router's BackendRefs.
	Backend int
	// Fraction is the share of requests mirrored, in (0, 1].
	Fraction float64
}

// Plain reports whether the rule leaves requests as they are.
func (r *HTTPRule) Plain() bool {
	return r == nil || (r.RequestHeaders == nil && r.ResponseHeaders == nil && r.BackendRequestHeaders == nil &&
		r.BackendResponseHeaders == nil && r.Redirect == nil && r.Rewrite == nil && r.Timeout == 0 && len(r.Mirrors) == 0 && r.CORS == nil)
}

// Rewrite changes what the backend is asked: its Host (Hostname, when
// set) and its path (Path, when set). The Gateway API's URLRewrite.
type Rewrite struct {
	Hostname string
	Path     *PathModifier
}

// PathModifier replaces a request's path: whole (Full), or the prefix
// the rule matched (Prefix, with Replace).
type PathModifier struct {
	Full string
	// Prefix is the PathPrefix value the rule's match had (no trailing
	// slash); Replace what takes its place. Used when Full is "".
	Prefix, Replace string
	// IsFull tells Full "" from no full replacement.
	IsFull bool
}

// Apply returns the path modified. A prefix is replaced element by
// element: the rest of the path keeps its leading slash, never doubled
// ("/" replacing "/strip" in "/strip/x" makes "/x"), and an empty result
// is "/".
func (m *PathModifier) Apply(path string) string {
	if m.IsFull {
		return m.Full
	}
	rest, ok := strings.CutPrefix(path, m.Prefix)
	if !ok {
		return path
	}
	out := strings.TrimSuffix(m.Replace, "/") + rest
	if out == "" {
		return "/"
	}
	return out
}

// HeaderEdit changes header fields in the order Set, Add, Remove (the
// Gateway API's HTTPHeaderFilter): Set replaces a field's values, Add
// appends one, Remove deletes the field.
type HeaderEdit struct {
	Set, Add []Header
	Remove   []string
}

// Header is one field.
type Header struct{ Name, Value string }

// Redirect answers with a redirect instead of forwarding: the request's
// URL with what is set here replaced. Port 0 keeps the scheme's default
// rule of the Gateway API (the listener's port, left out when it is the
// scheme's well-known one).
type Redirect struct {
	Scheme   string
	Hostname string
	Port     int
	// Path, when set, changes the path.
	Path *PathModifier
	// Status is 301, 302, 303, 307 or 308.
	Status int
}

// Apply edits h; a nil edit leaves it.
func (e *HeaderEdit) Apply(h http.Header) {
	if e == nil {
		return
	}
	for _, f := range e.Set {
		h.Set(f.Name, f.Value)
	}
	for _, f := range e.Add {
		h.Add(f.Name, f.Value)
	}
	for _, name := range e.Remove {
		h.Del(name)
	}
}
