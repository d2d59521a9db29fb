package route

import (
	"net"
	"path"
	"slices"
	"strings"
)

// Match returns the route for a request to host (a Host header: any case,
// with or without a port) and a path cleaned by CleanPath; nil means 404.
func (t *Table) Match(host, cleanPath string) *Route {
	hr := t.hostRoutes(NormalizeHost(host))
	if hr == nil {
		return t.catchAll
	}
	if r := hr.exact[cleanPath]; r != nil {
		return r
	}
	// The longest prefix first: the whole path, then up to each "/".
	p := strings.TrimSuffix(cleanPath, "/")
	for {
		if r := hr.prefix[p]; r != nil {
			return r
		}
		if p == "" {
			break
		}
		p = p[:strings.LastIndexByte(p, '/')]
	}
	if hr.def != nil {
		return hr.def
	}
	return t.catchAll
}

// hostRoutes picks the routes of a normalized host: exact, wildcard (one
// label), or those without a host.
func (t *Table) hostRoutes(host string) *hostRoutes {
	if hr := t.exact[host]; hr != nil {
		return hr
	}
	if i := strings.IndexByte(host, '.'); i > 0 {
		if hr := t.wildcard[host[i+1:]]; hr != nil {
			return hr
		}
	}
	return t.anyHost
}

// NormalizeHost lower-cases a Host header and drops its port and a
// trailing dot.
func NormalizeHost(h string) string {
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.HasSuffix(h, "]") {
		if host, _, err := net.SplitHostPort(h); err == nil {
			h = host
		}
	}
	h = strings.TrimSuffix(h, ".")
	for i := 0; i < len(h); i++ {
		if c := h[i]; 'A' <= c && c <= 'Z' {
			return strings.ToLower(h)
		}
	}
	return h
}

// CleanPath is the path a request is matched and forwarded with: repeated
// slashes merged and dot segments resolved, a trailing slash kept. ok is
// false for a path that does not start with "/".
func CleanPath(p string) (clean string, ok bool) {
	if !strings.HasPrefix(p, "/") {
		return "", false
	}
	if !needsCleaning(p) {
		return p, true
	}
	c := path.Clean(p)
	if c != "/" && (strings.HasSuffix(p, "/") || strings.HasSuffix(p, "/.") || strings.HasSuffix(p, "/..")) {
		c += "/"
	}
	return c, true
}

func needsCleaning(p string) bool {
	for i := 0; i < len(p); i++ {
		if p[i] != '/' || i+1 == len(p) {
			continue
		}
		rest := p[i+1:]
		if rest[0] == '/' || rest == "." || rest == ".." ||
			strings.HasPrefix(rest, "./") || strings.HasPrefix(rest, "../") {
			return true
		}
	}
	return false
}

// Routes lists every route, for display: catch-all, then hosts.
func (t *Table) Routes() []*Route {
	var out []*Route
	if t.catchAll != nil {
		out = append(out, t.catchAll)
	}
	add := func(hr *hostRoutes) {
		if hr == nil {
			return
		}
		if hr.def != nil {
			out = append(out, hr.def)
		}
		for _, r := range hr.exact {
			out = append(out, r)
		}
		for _, r := range hr.prefix {
			out = append(out, r)
		}
	}
	add(t.anyHost)
	for _, hr := range t.exact {
		add(hr)
	}
	for _, hr := range t.wildcard {
		add(hr)
	}
	sortRoutes(out)
	return out
}

func sortRoutes(rs []*Route) {
	less := func(a, b *Route) int {
		if c := strings.Compare(a.Host, b.Host); c != 0 {
			return c
		}
		if c := strings.Compare(a.Path, b.Path); c != 0 {
			return c
		}
		return strings.Compare(string(a.PathType), string(b.PathType))
	}
	slices.SortFunc(rs, less)
}
