package route

import "net/http"

// HTTPRule is what a Gateway API HTTPRoute rule does to the requests it
// matches besides choosing their backend: its filters, resolved by the
// gateway package. A nil field does nothing.
type HTTPRule struct {
	RequestHeaders  *HeaderEdit
	ResponseHeaders *HeaderEdit
	Redirect        *Redirect
}

// Plain reports whether the rule leaves requests as they are.
func (r *HTTPRule) Plain() bool {
	return r == nil || (r.RequestHeaders == nil && r.ResponseHeaders == nil && r.Redirect == nil)
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
	// Status is 301 or 302.
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
