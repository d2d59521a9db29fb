package route

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// CORS answers cross-origin requests as a Gateway API rule's CORS
// filter says: preflights by the proxy itself, the others with the
// response headers that let the browser read them.
type CORS struct {
	// AllowOrigins are scheme://host[:port], a host that may start with
	// "*" (any labels to its left), or "*" alone for every origin.
	AllowOrigins  []string
	AllowMethods  []string // "*" for all
	AllowHeaders  []string // "*" for all
	ExposeHeaders []string
	Credentials   bool
	// MaxAge is Access-Control-Max-Age in seconds; 0 leaves it out.
	MaxAge int
}

// Allows reports whether a request's Origin is allowed.
func (c *CORS) Allows(origin string) bool {
	o, ok := parseOrigin(origin)
	if !ok {
		return false
	}
	for _, a := range c.AllowOrigins {
		if a == "*" {
			return true
		}
		p, ok := parseOrigin(a)
		if !ok || p.scheme != o.scheme || p.port != o.port {
			continue
		}
		if suffix, wild := strings.CutPrefix(p.host, "*"); wild {
			if strings.HasSuffix(o.host, suffix) && len(o.host) > len(suffix) {
				return true
			}
		} else if p.host == o.host {
			return true
		}
	}
	return false
}

type origin struct{ scheme, host, port string }

func parseOrigin(s string) (origin, bool) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return origin{}, false
	}
	o := origin{scheme: u.Scheme, host: strings.ToLower(u.Hostname()), port: u.Port()}
	if o.port == "" {
		o.port = map[string]string{"http": "80", "https": "443"}[o.scheme]
	}
	return o, true
}

// Preflight reports whether r is a CORS preflight request.
func Preflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.Header.Get("Origin") != "" && r.Header.Get("Access-Control-Request-Method") != ""
}

// PreflightHeaders sets the answer's headers to a preflight from an
// allowed origin. A wildcard is answered with what was asked when
// credentials are allowed (the spec forbids "*" then).
func (c *CORS) PreflightHeaders(h http.Header, r *http.Request) {
	c.ResponseHeaders(h, r.Header.Get("Origin"))
	if m := c.AllowMethods; len(m) > 0 {
		asked := r.Header.Get("Access-Control-Request-Method")
		switch {
		case slices.Contains(m, "*") && c.Credentials:
			h.Set("Access-Control-Allow-Methods", asked)
		default:
			h.Set("Access-Control-Allow-Methods", strings.Join(m, ", "))
		}
	}
	if hs := c.AllowHeaders; len(hs) > 0 {
		asked := r.Header.Get("Access-Control-Request-Headers")
		switch {
		case slices.Contains(hs, "*") && c.Credentials:
			if asked != "" {
				h.Set("Access-Control-Allow-Headers", asked)
			}
		default:
			h.Set("Access-Control-Allow-Headers", strings.Join(hs, ", "))
		}
	}
	if c.MaxAge > 0 {
		h.Set("Access-Control-Max-Age", strconv.Itoa(c.MaxAge))
	}
}

// ResponseHeaders sets the headers of an answer to an allowed origin.
func (c *CORS) ResponseHeaders(h http.Header, origin string) {
	h.Set("Access-Control-Allow-Origin", origin)
	h.Add("Vary", "Origin")
	if c.Credentials {
		h.Set("Access-Control-Allow-Credentials", "true")
	}
	if e := c.ExposeHeaders; len(e) > 0 && !(c.Credentials && slices.Contains(e, "*")) {
		h.Set("Access-Control-Expose-Headers", strings.Join(e, ", "))
	}
}
