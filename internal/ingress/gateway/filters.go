package gateway

// A rule's filters, as what the proxy does (route.HTTPRule).

import (
	"fmt"
	"net/http"
	"slices"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/svcnet/svcnet/internal/ingress/route"
)

// withMirrors adds a rule's RequestMirror filters: each mirror's backend
// is checked as a backendRef is; one that cannot be used mirrors nothing
// and is told in reason and msg (for ResolvedRefs).
func (b *builder) withMirrors(r *routeIn, hr *route.HTTPRule, fs []gatewayv1.HTTPRouteFilter) (out *route.HTTPRule, reason, msg string) {
	out = hr
	for _, f := range fs {
		m := f.RequestMirror
		if f.Type != gatewayv1.HTTPRouteFilterRequestMirror || m == nil {
			continue
		}
		ref, _, why, problem := b.backendRef(r, &gatewayv1.BackendRef{BackendObjectReference: m.BackendRef})
		if why != "" {
			if reason == "" {
				reason, msg = why, "requestMirror: "+problem
			}
			continue
		}
		frac := 1.0
		switch {
		case m.Percent != nil:
			frac = float64(*m.Percent) / 100
		case m.Fraction != nil:
			den := int32(100)
			if m.Fraction.Denominator != nil {
				den = *m.Fraction.Denominator
			}
			if den > 0 {
				frac = float64(m.Fraction.Numerator) / float64(den)
			}
		}
		if frac <= 0 {
			continue
		}
		if out == hr {
			cp := route.HTTPRule{}
			if hr != nil {
				cp = *hr
			}
			cp.Mirrors = slices.Clone(cp.Mirrors)
			out = &cp
		}
		out.Mirrors = append(out.Mirrors, route.Mirror{Backend: b.ref(ref), Fraction: min(frac, 1)})
	}
	return out, reason, msg
}

// compileFilters turns a rule's filters into what the proxy does; why
// names the first it cannot do.
func compileFilters(fs []gatewayv1.HTTPRouteFilter) (*route.HTTPRule, string) {
	var r route.HTTPRule
	for _, f := range fs {
		switch f.Type {
		case gatewayv1.HTTPRouteFilterRequestHeaderModifier:
			if f.RequestHeaderModifier != nil {
				r.RequestHeaders = headerEdit(f.RequestHeaderModifier)
			}
		case gatewayv1.HTTPRouteFilterResponseHeaderModifier:
			if f.ResponseHeaderModifier != nil {
				r.ResponseHeaders = headerEdit(f.ResponseHeaderModifier)
			}
		case gatewayv1.HTTPRouteFilterRequestRedirect:
			rr := f.RequestRedirect
			if rr == nil {
				continue
			}
			red := &route.Redirect{Status: http.StatusFound}
			if rr.Path != nil {
				m, why := pathModifier(rr.Path)
				if why != "" {
					return nil, "requestRedirect: " + why
				}
				red.Path = m
			}
			if rr.Scheme != nil {
				red.Scheme = *rr.Scheme
			}
			if rr.Hostname != nil {
				red.Hostname = string(*rr.Hostname)
			}
			if rr.Port != nil {
				red.Port = int(*rr.Port)
			}
			if rr.StatusCode != nil {
				red.Status = *rr.StatusCode
			}
			r.Redirect = red
		case gatewayv1.HTTPRouteFilterRequestMirror:
			// Resolved with the backends (withMirrors).
		case gatewayv1.HTTPRouteFilterCORS:
			if f.CORS != nil {
				r.CORS = cors(f.CORS)
			}
		case gatewayv1.HTTPRouteFilterURLRewrite:
			u := f.URLRewrite
			if u == nil {
				continue
			}
			rw := &route.Rewrite{}
			if u.Hostname != nil {
				rw.Hostname = string(*u.Hostname)
			}
			if u.Path != nil {
				m, why := pathModifier(u.Path)
				if why != "" {
					return nil, "urlRewrite: " + why
				}
				rw.Path = m
			}
			r.Rewrite = rw
		default:
			return nil, fmt.Sprintf("filter %s is not supported yet", f.Type)
		}
	}
	if r.Redirect != nil && r.Rewrite != nil {
		return nil, "requestRedirect and urlRewrite cannot be in one rule"
	}
	if r.Plain() {
		return nil, ""
	}
	return &r, ""
}

// cors reads a CORS filter; maxAge defaults to the API's 5 s.
func cors(f *gatewayv1.HTTPCORSFilter) *route.CORS {
	c := &route.CORS{Credentials: f.AllowCredentials != nil && *f.AllowCredentials, MaxAge: 5}
	if f.MaxAge != 0 {
		c.MaxAge = int(f.MaxAge)
	}
	for _, o := range f.AllowOrigins {
		c.AllowOrigins = append(c.AllowOrigins, string(o))
	}
	for _, m := range f.AllowMethods {
		c.AllowMethods = append(c.AllowMethods, string(m))
	}
	for _, h := range f.AllowHeaders {
		c.AllowHeaders = append(c.AllowHeaders, string(h))
	}
	for _, h := range f.ExposeHeaders {
		c.ExposeHeaders = append(c.ExposeHeaders, string(h))
	}
	return c
}

// pathModifier reads an HTTPPathModifier; the prefix a ReplacePrefixMatch
// replaces is filled in per match (withPrefix).
func pathModifier(p *gatewayv1.HTTPPathModifier) (*route.PathModifier, string) {
	switch p.Type {
	case gatewayv1.FullPathHTTPPathModifier:
		if p.ReplaceFullPath == nil {
			return nil, "ReplaceFullPath needs replaceFullPath"
		}
		return &route.PathModifier{Full: *p.ReplaceFullPath, IsFull: true}, ""
	case gatewayv1.PrefixMatchHTTPPathModifier:
		if p.ReplacePrefixMatch == nil {
			return nil, "ReplacePrefixMatch needs replacePrefixMatch"
		}
		return &route.PathModifier{Replace: *p.ReplacePrefixMatch}, ""
	}
	return nil, fmt.Sprintf("path modifier %s is not supported", p.Type)
}

func headerEdit(f *gatewayv1.HTTPHeaderFilter) *route.HeaderEdit {
	e := &route.HeaderEdit{Remove: f.Remove}
	for _, h := range f.Set {
		e.Set = append(e.Set, route.Header{Name: string(h.Name), Value: h.Value})
	}
	for _, h := range f.Add {
		e.Add = append(e.Add, route.Header{Name: string(h.Name), Value: h.Value})
	}
	return e
}

// withBackendFilters is hr with a backendRef's header modifiers (the
// only filters unsupportedRule lets through).
func withBackendFilters(hr *route.HTTPRule, fs []gatewayv1.HTTPRouteFilter) *route.HTTPRule {
	if len(fs) == 0 {
		return hr
	}
	out := route.HTTPRule{}
	if hr != nil {
		out = *hr
	}
	for _, f := range fs {
		switch {
		case f.Type == gatewayv1.HTTPRouteFilterRequestHeaderModifier && f.RequestHeaderModifier != nil:
			out.BackendRequestHeaders = headerEdit(f.RequestHeaderModifier)
		case f.Type == gatewayv1.HTTPRouteFilterResponseHeaderModifier && f.ResponseHeaderModifier != nil:
			out.BackendResponseHeaders = headerEdit(f.ResponseHeaderModifier)
		}
	}
	return &out
}
