package convert

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/svcnet/svcnet/internal/ingress/annotations"
)

// The annotation prefixes read: svcnet ingress's own, which wins a
// setting both name, and ingress-nginx's.
const (
	svcnetPrefix = "svcnet.dev/"
	nginxPrefix  = "nginx.ingress.kubernetes.io/"
)

// lastApplied is kubectl's record of what it applied, not a setting:
// the one annotation passed over without a Note.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// ingress-nginx's defaults where the converted objects must spell out
// what ingress-nginx assumed.
const (
	nginxConnectTimeout = 5 * time.Second
	nginxReadTimeout    = 60 * time.Second
	// nginxRedirectCode is the status of ingress-nginx's redirects to
	// HTTPS (its http-redirect-code, 308 unless its ConfigMap says
	// otherwise), and of svcnet ingress's.
	nginxRedirectCode = 308
)

// settings is what an Ingress's annotations ask of its routes.
type settings struct {
	// sslRedirect redirects plain HTTP to HTTPS for hosts with a
	// certificate (default true); forceSSLRedirect for every host.
	sslRedirect, forceSSLRedirect bool
	// regex: ingress-nginx reads the paths as regular expressions
	// (use-regex, or its rewrite-target), regexKey the annotation that
	// makes it.
	regex    bool
	regexKey string
	// forceKey is the force-ssl-redirect annotation (for its Notes).
	forceKey string
	// rewrite is the rewrite-target ("" none), rewriteKey the annotation
	// it came from; nginxRewrite when it means what it means to
	// ingress-nginx (the whole path replaced), else svcnet ingress's
	// meaning (the matched prefix replaced).
	rewrite, rewriteKey string
	nginxRewrite        bool
	timeouts            *gatewayv1.HTTPRouteTimeouts
	cors                *gatewayv1.HTTPCORSFilter
	// protocol is GRPC or H2C when the pods speak HTTP/2 without TLS
	// (protocolKey the annotation); "" for HTTP/1.1.
	protocol, protocolKey string
	// canary is set on a canary Ingress.
	canary *canarySettings
}

// canarySettings are the canary-* annotations of a canary Ingress.
type canarySettings struct {
	weight, total       int
	header, headerValue string
}

// Reasons for the settings svcnet ingress serves but the Gateway API has
// no equivalent of.
const (
	whyBodySize    = "the Gateway API has no request-body limit"
	whySourceRange = "the Gateway API has no client-address allow-list: the converted routes answer every client"
	whyAffinity    = "the Gateway API's sessionPersistence is experimental and svcnet does not serve it: clients will not keep their pod"
	whyCookie      = "the Gateway API matches no cookies: this cookie will not pick the canary"
	whyBackendTLS  = "TLS to the pods takes a BackendTLSPolicy (which verifies their certificates, as ingress-nginx did not), and svcnet does not serve those yet: the routes would speak plain HTTP to them"
	whyUnknown     = "svcnet ingress convert has no Gateway API equivalent for it"
	whyCanaryOnly  = "ingress-nginx ignores it on a canary Ingress: the primary Ingress's settings apply"
)

// setting is one annotation read: its name without a prefix and what
// its value does. apply's error names the annotation as not carried
// over, with the error as the reason.
type setting struct {
	name string
	// nginxOnly is an ingress-nginx setting that svcnet ingress does not
	// have: read under nginx.ingress.kubernetes.io/ only.
	nginxOnly bool
	apply     func(p *parser, key, v string) error
}

func notCarried(why string) func(*parser, string, string) error {
	return func(*parser, string, string) error { return fmt.Errorf("%s", why) }
}

func boolSetting(field func(*parser) *bool) func(*parser, string, string) error {
	return func(p *parser, _, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%q is not true or false", v)
		}
		*field(p) = b
		return nil
	}
}

// checkBool checks a bool that was read before the other settings
// (canary, enable-cors), as it decides what they mean.
var checkBool = boolSetting(func(*parser) *bool { return new(bool) })

func timeoutSetting(field func(*parser) *time.Duration) func(*parser, string, string) error {
	return func(p *parser, key, v string) error {
		d, err := annotations.ParseTimeout(v)
		if err != nil {
			return err
		}
		*field(p) = d
		p.timeoutKeys = append(p.timeoutKeys, key)
		return nil
	}
}

var settingsTable = []setting{
	{name: "ssl-redirect", apply: boolSetting(func(p *parser) *bool { return &p.s.sslRedirect })},
	{name: "force-ssl-redirect", nginxOnly: true, apply: boolSetting(func(p *parser) *bool { return &p.s.forceSSLRedirect })},
	{name: "use-regex", nginxOnly: true, apply: boolSetting(func(p *parser) *bool { return &p.useRegex })},
	{name: "rewrite-target", apply: func(p *parser, key, v string) error {
		nginx := strings.HasPrefix(key, nginxPrefix)
		if v == "" {
			return fmt.Errorf("empty")
		}
		if !nginx && (!strings.HasPrefix(v, "/") || strings.ContainsAny(v, "$?#\\ \t\r\n") || strings.Contains(v, "//")) {
			// svcnet ingress refuses it (and serves none of the Ingress).
			return fmt.Errorf("%q is not a path", v)
		}
		p.s.rewrite, p.s.rewriteKey, p.s.nginxRewrite = v, key, nginx
		return nil
	}},
	{name: "backend-protocol", apply: func(p *parser, key, v string) error {
		switch strings.ToUpper(v) {
		case annotations.HTTP:
			return nil
		case annotations.GRPC, annotations.H2C:
			p.s.protocol, p.s.protocolKey = strings.ToUpper(v), key
			return nil
		case annotations.HTTPS, annotations.GRPCS:
			return fmt.Errorf("%s", whyBackendTLS)
		}
		return fmt.Errorf("%q is not one of HTTP, HTTPS, GRPC, GRPCS, H2C", v)
	}},
	{name: "proxy-body-size", apply: notCarried(whyBodySize)},
	{name: "proxy-connect-timeout", apply: timeoutSetting(func(p *parser) *time.Duration { return &p.connect })},
	{name: "proxy-read-timeout", apply: timeoutSetting(func(p *parser) *time.Duration { return &p.read })},
	{name: "proxy-send-timeout", apply: timeoutSetting(func(p *parser) *time.Duration { return &p.send })},
	{name: "allowlist-source-range", apply: notCarried(whySourceRange)},
	{name: "whitelist-source-range", apply: notCarried(whySourceRange)},
	{name: "affinity", apply: notCarried(whyAffinity)},
	{name: "session-cookie-name", apply: notCarried(whyAffinity)},
	{name: "session-cookie-path", apply: notCarried(whyAffinity)},
	{name: "session-cookie-max-age", apply: notCarried(whyAffinity)},
	{name: "session-cookie-secure", apply: notCarried(whyAffinity)},
	{name: "session-cookie-samesite", apply: notCarried(whyAffinity)},
	// The canary's: read only on a canary Ingress.
	{name: "canary", apply: checkBool},
	{name: "canary-by-header", apply: func(p *parser, _, v string) error {
		if !headerName.MatchString(v) {
			return fmt.Errorf("%q is not a header name", v)
		}
		p.s.canary.header = v
		return nil
	}},
	{name: "canary-by-header-value", apply: func(p *parser, _, v string) error {
		if v == "" || len(v) > 4096 || strings.ContainsAny(v, "\r\n") {
			return fmt.Errorf("%q is not a header value", v)
		}
		p.s.canary.headerValue = v
		return nil
	}},
	{name: "canary-by-cookie", apply: notCarried(whyCookie)},
	{name: "canary-weight", apply: func(p *parser, _, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return fmt.Errorf("%q is not a weight", v)
		}
		p.s.canary.weight = n
		return nil
	}},
	{name: "canary-weight-total", apply: func(p *parser, _, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1_000_000 {
			return fmt.Errorf("%q is not a total weight (1 to 1,000,000)", v)
		}
		p.s.canary.total = n
		return nil
	}},
	// ingress-nginx's CORS: read only with enable-cors (cors.go).
	{name: "enable-cors", nginxOnly: true, apply: checkBool},
	{name: "cors-allow-origin", nginxOnly: true, apply: corsOrigins},
	{name: "cors-allow-methods", nginxOnly: true, apply: corsMethods},
	{name: "cors-allow-headers", nginxOnly: true, apply: corsHeaders(func(c *gatewayv1.HTTPCORSFilter) *[]gatewayv1.HTTPHeaderName { return &c.AllowHeaders })},
	{name: "cors-expose-headers", nginxOnly: true, apply: corsHeaders(func(c *gatewayv1.HTTPCORSFilter) *[]gatewayv1.HTTPHeaderName { return &c.ExposeHeaders })},
	{name: "cors-allow-credentials", nginxOnly: true, apply: func(p *parser, _, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%q is not true or false", v)
		}
		p.cors.AllowCredentials = &b
		return nil
	}},
	{name: "cors-max-age", nginxOnly: true, apply: func(p *parser, _, v string) error {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 1 {
			return fmt.Errorf("%q is not a number of seconds (1 or more)", v)
		}
		p.cors.MaxAge = int32(n)
		return nil
	}},
}

func lookupSetting(name string) (setting, bool) {
	i := slices.IndexFunc(settingsTable, func(s setting) bool { return s.name == name })
	if i < 0 {
		return setting{}, false
	}
	return settingsTable[i], true
}

func isCanarySetting(name string) bool { return strings.HasPrefix(name, "canary") }

func isCORSSetting(name string) bool {
	return name == "enable-cors" || strings.HasPrefix(name, "cors-")
}

// parser reads one Ingress's annotations.
type parser struct {
	nn    types.NamespacedName
	class string // the Gateway's class, for the Notes
	s     settings
	notes []Note
	// carried are the annotations honoured.
	carried  []string
	useRegex bool
	// The timeouts given, and by which annotations.
	connect, read, send time.Duration
	timeoutKeys         []string
	// cors is the CORS filter read so far, from ingress-nginx's
	// defaults; corsOn when enable-cors asks for it.
	cors   gatewayv1.HTTPCORSFilter
	corsOn bool
}

func (p *parser) notCarried(key, format string, args ...any) {
	p.notes = append(p.notes, Note{Kind: NotCarriedOver, Ingress: p.nn, Annotation: key, Message: fmt.Sprintf(format, args...)})
}

func (p *parser) caveat(key, format string, args ...any) {
	p.notes = append(p.notes, Note{Kind: Caveat, Ingress: p.nn, Annotation: key, Message: fmt.Sprintf(format, args...)})
}

// uncarry takes back a setting found unusable once all were read,
// under either name.
func (p *parser) uncarry(name, format string, args ...any) {
	for _, key := range []string{svcnetPrefix + name, nginxPrefix + name} {
		if slices.Contains(p.carried, key) {
			p.carried = slices.DeleteFunc(p.carried, func(k string) bool { return k == key })
			p.notCarried(key, format, args...)
		}
	}
}

// parseSettings reads an Ingress's annotations. Each one ends up either
// in carried or in a NotCarriedOver Note (kubectl's last-applied record
// aside): that is the invariant the tests hold it to.
func parseSettings(nn types.NamespacedName, ann map[string]string, class string) (settings, []string, []Note) {
	p := &parser{nn: nn, class: class, s: settings{sslRedirect: true}}
	type value struct{ key, v string }
	byName := map[string][]value{} // svcnet.dev/'s first
	keys := make([]string, 0, len(ann))
	for k := range ann {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := strings.TrimSpace(ann[k])
		switch {
		case k == lastApplied:
		case strings.HasPrefix(k, svcnetPrefix):
			name := k[len(svcnetPrefix):]
			if st, ok := lookupSetting(name); !ok || st.nginxOnly {
				p.notCarried(k, "not a setting of svcnet ingress")
				continue
			}
			byName[name] = append([]value{{k, v}}, byName[name]...)
		case strings.HasPrefix(k, nginxPrefix):
			name := k[len(nginxPrefix):]
			if _, ok := lookupSetting(name); !ok {
				p.notCarried(k, "%s", whyUnknown)
				continue
			}
			byName[name] = append(byName[name], value{k, v})
		case k == "kubernetes.io/ingress.class":
			p.notCarried(k, "the Gateway's class is %s (--gateway-class)", class)
		default:
			p.notCarried(k, "not an ingress-nginx or svcnet setting; the Gateway API objects carry none of the Ingress's annotations")
		}
	}
	first := func(name string) (string, bool) {
		if vs := byName[name]; len(vs) > 0 {
			return vs[0].v, true
		}
		return "", false
	}
	// Whether the Ingress is a canary, and has CORS, decides what the
	// other annotations mean; a value that is not a bool is named below.
	if v, ok := first("canary"); ok {
		if on, _ := strconv.ParseBool(v); on {
			p.s.canary = &canarySettings{total: 100}
		}
	}
	if v, ok := first("enable-cors"); ok {
		if p.corsOn, _ = strconv.ParseBool(v); p.corsOn {
			p.cors = defaultCORS()
		}
	}
	for _, st := range settingsTable {
		vs := byName[st.name]
		if len(vs) == 0 {
			continue
		}
		key, v := vs[0].key, vs[0].v
		p.apply(st, key, v)
		for _, loser := range vs[1:] {
			if loser.v == v && slices.Contains(p.carried, key) {
				p.carried = append(p.carried, loser.key)
			} else {
				p.notCarried(loser.key, "%s is set too and wins", key)
			}
		}
	}
	p.finish()
	return p.s, p.carried, p.notes
}

// apply reads one setting, unless what the Ingress is makes it mean
// nothing.
func (p *parser) apply(st setting, key, v string) {
	switch {
	case p.s.canary != nil && !isCanarySetting(st.name):
		p.notCarried(key, "%s", whyCanaryOnly)
	case p.s.canary == nil && isCanarySetting(st.name) && st.name != "canary":
		p.notCarried(key, "no effect without canary: \"true\"")
	case !p.corsOn && isCORSSetting(st.name) && st.name != "enable-cors":
		p.notCarried(key, "no effect without enable-cors: \"true\"")
	default:
		if err := st.apply(p, key, v); err != nil {
			p.notCarried(key, "%v", err)
			return
		}
		p.carried = append(p.carried, key)
	}
}

// finish checks what depends on several annotations and builds the
// timeouts and the CORS filter.
func (p *parser) finish() {
	if c := p.s.canary; c != nil {
		if c.weight > c.total {
			p.uncarry("canary-weight", "%d is more than the total weight %d: no request is sent to the canary by weight", c.weight, c.total)
			c.weight = 0
		}
		if c.headerValue != "" && c.header == "" {
			p.uncarry("canary-by-header-value", "no effect without canary-by-header")
			c.headerValue = ""
		}
	}
	switch {
	case p.useRegex:
		p.s.regex = true
		p.s.regexKey, _ = p.keyOf("use-regex")
	case p.s.nginxRewrite && p.s.rewrite != "":
		p.s.regex, p.s.regexKey = true, p.s.rewriteKey
	}
	if p.s.forceSSLRedirect {
		p.s.forceKey, _ = p.keyOf("force-ssl-redirect")
	}
	if len(p.timeoutKeys) > 0 {
		p.s.timeouts = p.timeouts()
	}
	if p.corsOn {
		c := p.cors
		p.s.cors = &c
	}
}

// keyOf is the annotation that gave a setting.
func (p *parser) keyOf(name string) (string, bool) {
	for _, prefix := range []string{svcnetPrefix, nginxPrefix} {
		if slices.Contains(p.carried, prefix+name) {
			return prefix + name, true
		}
	}
	return "", false
}

// timeouts turns ingress-nginx's timeouts into the Gateway API's. They
// bound different things: ingress-nginx's each wait (connecting, then
// each write to the pod and each read from it), the Gateway API's
// backendRequest the whole request to a backend, answer included. The
// bound taken is the longest ingress-nginx let a request wait for the
// start of its answer: connecting, plus the read timeout, plus the send
// timeout when one was given (bodies being sent); the ones not given
// are ingress-nginx's defaults.
func (p *parser) timeouts() *gatewayv1.HTTPRouteTimeouts {
	connect, read := p.connect, p.read
	if connect == 0 {
		connect = nginxConnectTimeout
	}
	if read == 0 {
		read = nginxReadTimeout
	}
	d := gatewayDuration(connect + read + p.send)
	p.caveat(strings.Join(p.timeoutKeys, ", "), "timeouts.backendRequest %s bounds each request to a pod as a whole, answer included, where ingress-nginx bounded each wait (connecting, each write, each read): answers streamed for longer are cut off", d)
	return &gatewayv1.HTTPRouteTimeouts{BackendRequest: &d}
}

// gatewayDuration spells d as the Gateway API's Duration
// (^([0-9]{1,5}(h|m|s|ms)){1,4}$), rounded up to a millisecond.
func gatewayDuration(d time.Duration) gatewayv1.Duration {
	if r := d % time.Millisecond; r != 0 {
		d += time.Millisecond - r
	}
	var b strings.Builder
	for _, u := range []struct {
		unit time.Duration
		name string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}} {
		if n := d / u.unit; n > 0 {
			fmt.Fprintf(&b, "%d%s", n, u.name)
			d -= n * u.unit
		}
	}
	if b.Len() == 0 {
		return "0s"
	}
	return gatewayv1.Duration(b.String())
}
