// Package annotations reads the per-Ingress settings of svcnet ingress
// from an Ingress's annotations. Names live under svcnet.dev/; the
// ingress-nginx name of the same setting (nginx.ingress.kubernetes.io/…)
// is accepted where the meaning is the same, ours winning when both are
// set. Every value is parsed and checked here; nothing a user writes is
// ever pasted into a configuration language. It is pure: a map in, a
// Config and the problems out.
package annotations

import (
	"cmp"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Prefixes are the annotation namespaces read: ours first.
var Prefixes = []string{"svcnet.dev/", "nginx.ingress.kubernetes.io/"}

// Backend protocols.
const (
	HTTP  = "HTTP"
	HTTPS = "HTTPS"
	GRPC  = "GRPC"
	GRPCS = "GRPCS"
	H2C   = "H2C"
)

// Config is what an Ingress's annotations ask for. The zero value of each
// field means the controller's default.
type Config struct {
	// SSLRedirect answers plain HTTP to a TLS host with a 308 to https.
	SSLRedirect bool
	// RewriteTarget replaces the part of the path that the rule matched
	// ("" keeps the path).
	RewriteTarget string
	// BackendProtocol is how the pods are spoken to: HTTP (default),
	// HTTPS, GRPC (HTTP/2 without TLS), GRPCS (HTTP/2 over TLS) or H2C.
	BackendProtocol string
	// BodySize is the largest request body accepted: 0 the controller's
	// default, -1 no limit.
	BodySize int64
	// Timeouts toward the pods (0: the controller's).
	ConnectTimeout, ReadTimeout, SendTimeout time.Duration
	// SourceRanges, when set, are the client addresses allowed (others
	// get 403).
	SourceRanges []netip.Prefix
	// Affinity, when set, keeps a client on one pod by a cookie.
	Affinity *Affinity
	// Canary, when set, makes the Ingress a canary of another that
	// serves the same host and path.
	Canary *Canary
}

// Canary says which requests go to a canary Ingress's backend, in
// ingress-nginx's order: the header, then the cookie, then the weight.
type Canary struct {
	Header      string // "always" sends to the canary, "never" not; else HeaderValue decides
	HeaderValue string
	Cookie      string // "always" or "never"
	Weight      int    // out of WeightTotal
	WeightTotal int
}

// Affinity is cookie-based session affinity, as ingress-nginx's
// affinity: cookie.
type Affinity struct {
	Cookie   string        // the cookie's name (INGRESSCOOKIE)
	Path     string        // its Path attribute ("/")
	MaxAge   time.Duration // 0: a session cookie
	Secure   bool
	SameSite http.SameSite
}

// Problem is an annotation that cannot be used. Bad values make the
// Ingress's routes left out (Fatal): serving them without what was asked
// (an allow-list, say) could be worse than not serving them.
type Problem struct {
	Annotation string
	Message    string
	Fatal      bool
}

// setting is one known annotation: its name without a prefix and how to
// apply its value.
type setting struct {
	name  string
	apply func(c *Config, v string) error
}

var settings = []setting{
	{"ssl-redirect", func(c *Config, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%q is not true or false", v)
		}
		c.SSLRedirect = b
		return nil
	}},
	{"rewrite-target", func(c *Config, v string) error {
		if !strings.HasPrefix(v, "/") || strings.ContainsAny(v, "$?#\\ \t\r\n") || strings.Contains(v, "//") {
			return fmt.Errorf("%q is not a path: it must start with /, and capture groups ($1) and queries are not supported", v)
		}
		c.RewriteTarget = v
		return nil
	}},
	{"backend-protocol", func(c *Config, v string) error {
		p := strings.ToUpper(v)
		if !slices.Contains([]string{HTTP, HTTPS, GRPC, GRPCS, H2C}, p) {
			return fmt.Errorf("%q is not one of HTTP, HTTPS, GRPC, GRPCS, H2C", v)
		}
		c.BackendProtocol = p
		return nil
	}},
	{"proxy-body-size", func(c *Config, v string) error {
		n, err := ParseSize(v)
		if err != nil {
			return err
		}
		c.BodySize = n
		return nil
	}},
	{"proxy-connect-timeout", timeout(func(c *Config) *time.Duration { return &c.ConnectTimeout })},
	{"proxy-read-timeout", timeout(func(c *Config) *time.Duration { return &c.ReadTimeout })},
	{"proxy-send-timeout", timeout(func(c *Config) *time.Duration { return &c.SendTimeout })},
	{"allowlist-source-range", sourceRanges},
	{"whitelist-source-range", sourceRanges}, // ingress-nginx's older name
	{"affinity", func(c *Config, v string) error {
		if v != "cookie" {
			return fmt.Errorf("%q: only cookie is supported", v)
		}
		c.affinity().Cookie = cmp.Or(c.affinity().Cookie, DefaultAffinityCookie)
		return nil
	}},
	{"session-cookie-name", func(c *Config, v string) error {
		if !validCookieName(v) {
			return fmt.Errorf("%q is not a cookie name", v)
		}
		c.affinity().Cookie = v
		return nil
	}},
	{"session-cookie-path", func(c *Config, v string) error {
		if !strings.HasPrefix(v, "/") || strings.ContainsAny(v, ";, \t\r\n") {
			return fmt.Errorf("%q is not a cookie path", v)
		}
		c.affinity().Path = v
		return nil
	}},
	{"session-cookie-max-age", func(c *Config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10*365*24*3600 {
			return fmt.Errorf("%q is not a number of seconds", v)
		}
		c.affinity().MaxAge = time.Duration(n) * time.Second
		return nil
	}},
	{"session-cookie-secure", func(c *Config, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%q is not true or false", v)
		}
		c.affinity().Secure = b
		return nil
	}},
	{"session-cookie-samesite", func(c *Config, v string) error {
		m := map[string]http.SameSite{"none": http.SameSiteNoneMode, "lax": http.SameSiteLaxMode, "strict": http.SameSiteStrictMode}
		ss, ok := m[strings.ToLower(v)]
		if !ok {
			return fmt.Errorf("%q is not None, Lax or Strict", v)
		}
		c.affinity().SameSite = ss
		return nil
	}},
}

// canarySettings only count with canary: "true".
var canarySettings = []setting{
	{"canary", func(c *Config, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%q is not true or false", v)
		}
		if !b {
			c.Canary = nil
		}
		return nil
	}},
	{"canary-by-header", func(c *Config, v string) error {
		if !validCookieName(v) {
			return fmt.Errorf("%q is not a header name", v)
		}
		c.Canary.Header = http.CanonicalHeaderKey(v)
		return nil
	}},
	{"canary-by-header-value", func(c *Config, v string) error {
		if v == "" || strings.ContainsAny(v, "\r\n") {
			return fmt.Errorf("%q is not a header value", v)
		}
		c.Canary.HeaderValue = v
		return nil
	}},
	{"canary-by-cookie", func(c *Config, v string) error {
		if !validCookieName(v) {
			return fmt.Errorf("%q is not a cookie name", v)
		}
		c.Canary.Cookie = v
		return nil
	}},
	{"canary-weight", func(c *Config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return fmt.Errorf("%q is not a weight", v)
		}
		c.Canary.Weight = n
		return nil
	}},
	{"canary-weight-total", func(c *Config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1_000_000 {
			return fmt.Errorf("%q is not a total weight (1 to 1,000,000)", v)
		}
		c.Canary.WeightTotal = n
		return nil
	}},
}

// DefaultAffinityCookie is ingress-nginx's cookie name.
const DefaultAffinityCookie = "INGRESSCOOKIE"

// affinity is the Affinity being parsed; the session-cookie-* settings
// only count when affinity: cookie is set too (checked in Parse).
func (c *Config) affinity() *Affinity {
	if c.Affinity == nil {
		c.Affinity = &Affinity{Path: "/"}
	}
	return c.Affinity
}

// validCookieName is RFC 6265's token.
func validCookieName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("()<>@,;:\\\"/[]?={}", c) >= 0 {
			return false
		}
	}
	return true
}

func timeout(field func(*Config) *time.Duration) func(*Config, string) error {
	return func(c *Config, v string) error {
		d, err := ParseTimeout(v)
		if err != nil {
			return err
		}
		*field(c) = d
		return nil
	}
}

func sourceRanges(c *Config, v string) error {
	var out []netip.Prefix
	for _, s := range strings.Split(v, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return fmt.Errorf("%q is not a CIDR or an address", s)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked())
	}
	if len(out) == 0 {
		return fmt.Errorf("%q lists no range", v)
	}
	c.SourceRanges = out
	return nil
}

// Parse reads the annotations. Unknown names under the prefixes are
// problems too, but not fatal: the Ingress is served without them.
func Parse(annotations map[string]string) (Config, []Problem) {
	c := Config{SSLRedirect: true}
	var problems []Problem
	problems = append(problems, apply(&c, annotations, settings)...)
	if c.Affinity != nil {
		if _, on := firstOf(annotations, "affinity"); !on {
			// session-cookie-* without affinity: cookie asks for nothing.
			c.Affinity = nil
		} else {
			c.Affinity.Cookie = cmp.Or(c.Affinity.Cookie, DefaultAffinityCookie)
		}
	}
	if v, on := firstOf(annotations, "canary"); on && strings.TrimSpace(v) == "true" {
		c.Canary = &Canary{WeightTotal: 100}
		problems = append(problems, apply(&c, annotations, canarySettings)...)
		if c.Canary != nil && c.Canary.Weight > c.Canary.WeightTotal {
			problems = append(problems, Problem{Annotation: "canary-weight", Fatal: true,
				Message: fmt.Sprintf("%d is more than the total weight %d", c.Canary.Weight, c.Canary.WeightTotal)})
		}
	} else {
		problems = append(problems, apply(&c, annotations, canarySettings[:1])...)
	}
	var unknown []string
	for a := range annotations {
		for _, prefix := range Prefixes {
			known := func(s setting) bool { return prefix+s.name == a }
			if strings.HasPrefix(a, prefix) && !slices.ContainsFunc(settings, known) && !slices.ContainsFunc(canarySettings, known) {
				unknown = append(unknown, a)
			}
		}
	}
	slices.Sort(unknown)
	for _, a := range unknown {
		problems = append(problems, Problem{Annotation: a, Message: "not supported by svcnet ingress; it has no effect"})
	}
	return c, problems
}

// apply reads the settings from the annotations: ours first, then
// ingress-nginx's; a setting taken stays taken.
func apply(c *Config, annotations map[string]string, settings []setting) []Problem {
	var problems []Problem
	taken := map[string]string{}
	for _, prefix := range Prefixes {
		for _, s := range settings {
			key := prefix + s.name
			v, ok := annotations[key]
			if !ok {
				continue
			}
			if by, done := taken[canonical(s.name)]; done {
				if annotations[by] != v {
					problems = append(problems, Problem{Annotation: key, Message: fmt.Sprintf("ignored: %s is set too and wins", by)})
				}
				continue
			}
			taken[canonical(s.name)] = key
			if err := s.apply(c, strings.TrimSpace(v)); err != nil {
				problems = append(problems, Problem{Annotation: key, Message: err.Error(), Fatal: true})
			}
		}
	}
	return problems
}

// firstOf returns the value of a setting under the first prefix that has
// it.
func firstOf(annotations map[string]string, name string) (string, bool) {
	for _, p := range Prefixes {
		if v, ok := annotations[p+name]; ok {
			return v, true
		}
	}
	return "", false
}

// canonical folds the names of one setting.
func canonical(name string) string {
	if name == "whitelist-source-range" {
		return "allowlist-source-range"
	}
	return name
}

// ParseSize reads nginx's size syntax (client_max_body_size): bytes, or a
// number with k, m or g; 0 means no limit, returned as -1.
func ParseSize(s string) (int64, error) {
	if s == "" {
		return 0, fmt.Errorf("empty size")
	}
	mult := int64(1)
	switch s[len(s)-1] {
	case 'k', 'K':
		mult = 1 << 10
	case 'm', 'M':
		mult = 1 << 20
	case 'g', 'G':
		mult = 1 << 30
	}
	num := s
	if mult > 1 {
		num = s[:len(s)-1]
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("%q is not a size (bytes, or a number with k, m or g)", s)
	}
	if n == 0 {
		return -1, nil
	}
	return n * mult, nil
}

// ParseTimeout reads a timeout as ingress-nginx writes it (seconds: "60")
// or as a Go duration ("1m30s"); between 1 ms and one hour.
func ParseTimeout(s string) (time.Duration, error) {
	var d time.Duration
	if n, err := strconv.Atoi(s); err == nil {
		d = time.Duration(n) * time.Second
	} else if d, err = time.ParseDuration(s); err != nil {
		return 0, fmt.Errorf("%q is not a timeout (seconds, or a duration such as 90s)", s)
	}
	if d < time.Millisecond || d > time.Hour {
		return 0, fmt.Errorf("%q is out of range (1ms to 1h)", s)
	}
	return d, nil
}
