package convert

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// The Gateway API's patterns for what CORS and header matches name
// (HTTPHeaderName, CORSOrigin).
var (
	headerName = regexp.MustCompile("^[A-Za-z0-9!#$%&'*+\\-.^_`|~]+$")
	corsOrigin = regexp.MustCompile(`(^\*$)|(^(http(s)?):\/\/(((\*\.)?([a-zA-Z0-9\-]+\.)*[a-zA-Z0-9-]+|\*)(:([0-9]{1,5}))?)$)`)
)

// ingress-nginx's values for the cors-* annotations not given, once
// enable-cors is true (cors-allow-origin "*", cors-allow-credentials
// true, cors-expose-headers none).
const (
	nginxCORSMethods = "GET, PUT, POST, DELETE, PATCH, OPTIONS"
	nginxCORSHeaders = "DNT,Keep-Alive,User-Agent,X-Requested-With,If-Modified-Since,Cache-Control,Content-Type,Range,Authorization"
	nginxCORSMaxAge  = 1728000
)

// corsMethodNames are the methods an HTTPCORSFilter may allow.
var corsMethodNames = []string{"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH", "*"}

func defaultCORS() gatewayv1.HTTPCORSFilter {
	yes := true
	c := gatewayv1.HTTPCORSFilter{AllowOrigins: []gatewayv1.CORSOrigin{"*"}, AllowCredentials: &yes, MaxAge: nginxCORSMaxAge}
	for _, m := range splitList(nginxCORSMethods) {
		c.AllowMethods = append(c.AllowMethods, gatewayv1.HTTPMethodWithWildcard(m))
	}
	for _, h := range splitList(nginxCORSHeaders) {
		c.AllowHeaders = append(c.AllowHeaders, gatewayv1.HTTPHeaderName(h))
	}
	return c
}

// splitList splits a comma-separated annotation value, spaces trimmed
// and empty items and repeats dropped.
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// corsOrigins reads cors-allow-origin. ingress-nginx takes other schemes
// than http(s) too; the Gateway API does not, and those are named. A
// "*" among others allows every origin, as the Gateway API's "*" must
// stand alone.
func corsOrigins(p *parser, key, v string) error {
	var ok, bad []string
	for _, o := range splitList(v) {
		if corsOrigin.MatchString(o) {
			ok = append(ok, o)
		} else {
			bad = append(bad, o)
		}
	}
	if len(ok) == 0 {
		return fmt.Errorf("%q lists no origin the Gateway API takes (http or https, a host that may start with *., a port): no origin is allowed", v)
	}
	if slices.Contains(ok, "*") {
		ok = []string{"*"}
	}
	if len(ok) > 64 {
		return fmt.Errorf("%d origins: the Gateway API takes 64 at most", len(ok))
	}
	if len(bad) > 0 {
		p.caveat(key, "origins %q are not ones the Gateway API takes (http or https, a host that may start with *., a port): they are not allowed", bad)
	}
	if slices.ContainsFunc(ok, func(o string) bool { return strings.Contains(o, "*.") }) {
		p.caveat(key, "a *. in an origin stands for one label to ingress-nginx, any number of labels to the Gateway API")
	}
	p.cors.AllowOrigins = nil
	for _, o := range ok {
		p.cors.AllowOrigins = append(p.cors.AllowOrigins, gatewayv1.CORSOrigin(o))
	}
	return nil
}

// corsMethods reads cors-allow-methods: method names as the Gateway API
// spells them (upper case).
func corsMethods(p *parser, key, v string) error {
	var ok, bad []string
	for _, m := range splitList(v) {
		if u := strings.ToUpper(m); slices.Contains(corsMethodNames, u) {
			if !slices.Contains(ok, u) {
				ok = append(ok, u)
			}
		} else {
			bad = append(bad, m)
		}
	}
	if len(ok) == 0 && len(bad) > 0 {
		return fmt.Errorf("%q lists no method the Gateway API's CORS filter takes (%s)", v, strings.Join(corsMethodNames, ", "))
	}
	if slices.Contains(ok, "*") {
		ok = []string{"*"}
	}
	if len(bad) > 0 {
		p.caveat(key, "methods %q are not ones the Gateway API's CORS filter takes: they are not allowed", bad)
	}
	p.cors.AllowMethods = nil
	for _, m := range ok {
		p.cors.AllowMethods = append(p.cors.AllowMethods, gatewayv1.HTTPMethodWithWildcard(m))
	}
	return nil
}

// corsHeaders reads a list of header names (cors-allow-headers,
// cors-expose-headers).
func corsHeaders(field func(*gatewayv1.HTTPCORSFilter) *[]gatewayv1.HTTPHeaderName) func(*parser, string, string) error {
	return func(p *parser, key, v string) error {
		var ok, bad []string
		for _, h := range splitList(v) {
			if headerName.MatchString(h) && len(h) <= 256 {
				ok = append(ok, h)
			} else {
				bad = append(bad, h)
			}
		}
		if len(ok) == 0 && len(bad) > 0 {
			return fmt.Errorf("%q lists no header name", v)
		}
		if slices.Contains(ok, "*") {
			ok = []string{"*"}
		}
		if len(ok) > 64 {
			return fmt.Errorf("%d headers: the Gateway API takes 64 at most", len(ok))
		}
		if len(bad) > 0 {
			p.caveat(key, "%q are not header names: left out", bad)
		}
		list := field(&p.cors)
		*list = nil
		for _, h := range ok {
			*list = append(*list, gatewayv1.HTTPHeaderName(h))
		}
		return nil
	}
}
