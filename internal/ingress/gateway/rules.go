package gateway

// The compilation of a route's rules: their matches, and what a rule
// does besides choosing a backend.

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/svcnet/svcnet/internal/ingress/route"
)

// compileRules compiles a route's rules. unsupported tells why the route
// cannot be served as it asks; resolved is its ResolvedRefs condition.
func (b *builder) compileRules(r *routeIn, nn types.NamespacedName) (rules []rule, unsupported string, resolved metav1.Condition) {
	gen := r.meta.Generation
	resolved = cond(string(gatewayv1.RouteConditionResolvedRefs), true, string(gatewayv1.RouteReasonResolvedRefs), "", gen)
	for i := range r.spec.Rules {
		ru := &r.spec.Rules[i]
		httpRule, why := compileFilters(ru.Filters)
		if why == "" {
			why = unsupportedRule(ru)
		}
		if why == "" {
			httpRule, why = withTimeouts(httpRule, ru.Timeouts)
		}
		if why == "" {
			var reason, msg string
			httpRule, reason, msg = b.withMirrors(r, httpRule, ru.Filters)
			if reason != "" && resolved.Status == metav1.ConditionTrue {
				resolved = cond(string(gatewayv1.RouteConditionResolvedRefs), false, reason, msg, gen)
			}
		}
		if why != "" {
			return nil, fmt.Sprintf("rule %d: %s", i, why), resolved
		}
		routes, weights, total, reason, msg := b.ruleBackends(r, nn, ru, httpRule)
		if reason != "" && resolved.Status == metav1.ConditionTrue {
			resolved = cond(string(gatewayv1.RouteConditionResolvedRefs), false, reason, msg, gen)
		}
		matches := ru.Matches
		if len(matches) == 0 {
			matches = []gatewayv1.HTTPRouteMatch{{}}
		}
		var compiled rule
		for j := range matches {
			m, err := compileMatch(&matches[j])
			if err != nil {
				return nil, fmt.Sprintf("rule %d match %d: %v", i, j, err), resolved
			}
			m.routes, m.weights, m.total = routes, weights, total
			if prefixed := withPrefix(httpRule, m.path); prefixed != httpRule {
				// A prefix replacement is the match's: the routes
				// of this match carry their own rule.
				if prefixed == nil {
					return nil, fmt.Sprintf("rule %d match %d: ReplacePrefixMatch needs a PathPrefix match", i, j), resolved
				}
				m.routes, m.weights, m.total, _, _ = b.ruleBackends(r, nn, ru, prefixed)
			}
			compiled.matches = append(compiled.matches, m)
		}
		rules = append(rules, compiled)
	}
	return rules, "", resolved
}

// withPrefix is hr with the prefix of a PathPrefix match filled into its
// prefix replacements; hr itself when it has none, nil when the match is
// not a PathPrefix.
func withPrefix(hr *route.HTTPRule, p pathMatch) *route.HTTPRule {
	needs := func(m *route.PathModifier) bool { return m != nil && !m.IsFull }
	if hr == nil || !(hr.Redirect != nil && needs(hr.Redirect.Path)) && !(hr.Rewrite != nil && needs(hr.Rewrite.Path)) {
		return hr
	}
	if p.kind != pathPrefix {
		return nil
	}
	out := *hr
	if hr.Redirect != nil && needs(hr.Redirect.Path) {
		red, m := *hr.Redirect, *hr.Redirect.Path
		m.Prefix = p.value
		red.Path, out.Redirect = &m, &red
	}
	if hr.Rewrite != nil && needs(hr.Rewrite.Path) {
		rw, m := *hr.Rewrite, *hr.Rewrite.Path
		m.Prefix = p.value
		rw.Path, out.Rewrite = &m, &rw
	}
	return &out
}

// withTimeouts adds a rule's timeouts to what it does. svcnet bounds the
// whole request with the smaller of request and backendRequest: it does
// not retry a request that reached a backend, so a request's one
// backend request is the request.
func withTimeouts(hr *route.HTTPRule, t *gatewayv1.HTTPRouteTimeouts) (*route.HTTPRule, string) {
	if t == nil {
		return hr, ""
	}
	var d time.Duration
	for _, v := range []*gatewayv1.Duration{t.Request, t.BackendRequest} {
		if v == nil {
			continue
		}
		x, err := time.ParseDuration(string(*v))
		if err != nil || x < 0 {
			return nil, fmt.Sprintf("timeout %q is not a duration", *v)
		}
		if x > 0 && (d == 0 || x < d) {
			d = x
		}
	}
	if d == 0 {
		return hr, ""
	}
	out := route.HTTPRule{}
	if hr != nil {
		out = *hr
	}
	out.Timeout = d
	return &out, ""
}

// unsupportedRule tells what of a rule svcnet does not implement yet.
func unsupportedRule(ru *gatewayv1.HTTPRouteRule) string {
	switch {
	case ru.Retry != nil:
		return "retry is not supported yet"
	case ru.SessionPersistence != nil:
		return "sessionPersistence is not supported yet"
	}
	for _, br := range ru.BackendRefs {
		for _, f := range br.Filters {
			if f.Type != gatewayv1.HTTPRouteFilterRequestHeaderModifier && f.Type != gatewayv1.HTTPRouteFilterResponseHeaderModifier {
				return fmt.Sprintf("filter %s of a backendRef is not supported yet (header modifiers are)", f.Type)
			}
		}
	}
	return ""
}

func compileMatch(m *gatewayv1.HTTPRouteMatch) (match, error) {
	out := match{path: pathMatch{kind: pathPrefix}}
	if p := m.Path; p != nil {
		v := "/"
		if p.Value != nil {
			v = *p.Value
		}
		t := gatewayv1.PathMatchPathPrefix
		if p.Type != nil {
			t = *p.Type
		}
		switch t {
		case gatewayv1.PathMatchExact:
			out.path = pathMatch{kind: pathExact, value: v}
		case gatewayv1.PathMatchPathPrefix:
			out.path = pathMatch{kind: pathPrefix, value: strings.TrimSuffix(v, "/")}
		case gatewayv1.PathMatchRegularExpression:
			re, err := compileRegexp(v)
			if err != nil {
				return out, fmt.Errorf("path: %w", err)
			}
			out.path = pathMatch{kind: pathRegex, value: v, re: re}
		default:
			return out, fmt.Errorf("path match type %s is not supported", t)
		}
	}
	if m.Method != nil {
		out.method = string(*m.Method)
	}
	for _, h := range m.Headers {
		hm := headerMatch{name: http.CanonicalHeaderKey(string(h.Name)), value: h.Value}
		if h.Type != nil && *h.Type == gatewayv1.HeaderMatchRegularExpression {
			re, err := compileRegexp(h.Value)
			if err != nil {
				return out, fmt.Errorf("header %s: %w", h.Name, err)
			}
			hm.re = re
		}
		out.header = append(out.header, hm)
	}
	for _, q := range m.QueryParams {
		qm := queryMatch{name: string(q.Name), value: q.Value}
		if q.Type != nil && *q.Type == gatewayv1.QueryParamMatchRegularExpression {
			re, err := compileRegexp(q.Value)
			if err != nil {
				return out, fmt.Errorf("query parameter %s: %w", q.Name, err)
			}
			qm.re = re
		}
		out.query = append(out.query, qm)
	}
	return out, nil
}
