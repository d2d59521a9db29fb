package gateway

import "strings"

// The Gateway API's hostnames: exact, or a wildcard "*.example.com" that
// stands for one or more labels before the suffix (not "example.com"
// itself, unlike an Ingress's wildcard of exactly one label).

// hostMatches reports whether host (lower-case, no port) is matched by
// pattern, exact or wildcard.
func hostMatches(pattern, host string) bool {
	if suffix, ok := strings.CutPrefix(pattern, "*"); ok {
		return len(host) > len(suffix) && strings.HasSuffix(host, suffix)
	}
	return pattern == host
}

// intersect is the hostname that both a listener's hostname and a route's
// match: the more specific of the two, or "" with ok false when they
// share none. An empty hostname matches every host.
func intersect(listener, route string) (string, bool) {
	switch {
	case listener == "":
		return route, true
	case route == "":
		return listener, true
	case hostMatches(listener, route) || listener == route:
		return route, true
	case hostMatches(route, listener):
		return listener, true
	}
	return "", false
}

// specificity orders hostnames as the spec's precedence does: more
// characters outside a wildcard first, then more characters; "" (every
// host) last.
func specificity(h string) (plain, all int) {
	if strings.HasPrefix(h, "*") {
		return 0, len(h)
	}
	return len(h), len(h)
}
